# trustplane — see README.md. The two commands a newcomer needs: `make run`, `make test`.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit is stamped explicitly: Go's own stamp (vcs.revision) is never made by go run,
# nor by go build with -buildvcs=false (which `go env GOFLAGS` may hold).
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/trustplane/trustplane/internal/version.Version=$(VERSION) \
           -X github.com/trustplane/trustplane/internal/version.Commit=$(COMMIT)

BIN            := $(CURDIR)/bin
K8S_BIN        := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
HELM           := $(BIN)/helm
GOLANGCI_LINT  := $(BIN)/lint/golangci-lint

# envtest (tests and make run) starts the kube-apiserver and etcd found here.
export KUBEBUILDER_ASSETS := $(K8S_BIN)
export TRUSTPLANE_BIN := $(BIN)

# test/node waits about 25 minutes for the kubelet's refresh and overdue warning.
GO_TEST_FLAGS ?= -timeout 45m

# Every build, tool and test runs on this Go, which the go command takes from the module
# proxy (a machine's own Go ignores go.mod's toolchain line): its standard library has the
# fixes govulncheck asks for (crypto/x509, crypto/tls, net/http; go1.26.8 has not).
export GOTOOLCHAIN := go1.27.3

# The offline vulnerability database `make vuln` builds: the database's source, the module
# golang.org/x/vulndb, pinned by version and checksum (vuln.go.dev is not reachable here).
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB_SUM     := h1:mfngRv0Yoh0VApsXKEN82CjD99kl7mtparN3bs3JnqI=
VULNDB         := $(BIN)/vulndb/$(VULNDB_VERSION)
GOVULNCHECK    := $(BIN)/vuln/govulncheck
FUZZTIME_TEST  ?= 3s

##@ Everyday

.PHONY: run
run: k8s-bins run-program node ## Run every controller against a local control plane (or $$KUBECONFIG's cluster), with a real node where the machine allows it.
	exec $(BIN)/trustplane-run --dir .local

.PHONY: test
test: k8s-bins aggregation-oracle tools test-deps node-test-deps lint vuln ## Lint and govulncheck, then run every test against a real kube-apiserver + etcd (and a real node, as root), and every fuzz target briefly.
	hack/test.sh $(GO_TEST_FLAGS)
	cd test/k8speers && go test $(GO_TEST_FLAGS) ./...
	hack/fuzz.sh $(FUZZTIME_TEST)

# One wing's tests: its packages under internal/<wing> and its suites under test/<wing>
# (docs/architecture.md); the cross-system suites run only under make test.
wing-test = go test $(GO_TEST_FLAGS) ./internal/$(1)/... ./test/$(1)/...

.PHONY: test-jwks test-aggregation test-checksum test-podcert test-provisioning
test-jwks: k8s-bins tools test-deps ## The JWKS wing's tests (internal/jwks, test/jwks).
	$(call wing-test,jwks)
test-aggregation: k8s-bins tools test-deps ## The aggregation wing's tests (internal/aggregation, test/aggregation).
	$(call wing-test,aggregation)
test-checksum: k8s-bins tools test-deps ## The secret-checksum wing's tests (internal/checksum, test/checksum).
	$(call wing-test,checksum)
test-podcert: k8s-bins tools test-deps ## The pod-certificate wing's tests (internal/podcert, test/podcert).
	$(call wing-test,podcert)
test-provisioning: k8s-bins tools test-deps ## The Cluster, Subscription and Kubeconfig wing's tests (internal/provisioning, test/provisioning).
	$(call wing-test,provisioning)

##@ Development

.PHONY: build
build: ## Build bin/trustplane.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/trustplane ./cmd/trustplane

# Images carry the chart's appVersion as their tag, as the chart and kustomize name them.
IMAGE_TAG         ?= $(shell sed -n 's/^appVersion: "\(.*\)"/\1/p' charts/trustplane/Chart.yaml)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
.PHONY: images
images: build test-deps ## Build the trustplane, jwks-nginx and pause images as OCI archives with SBOMs into bin/images (no Docker engine or registry needed); prints their digests.
	hack/build-cached.sh hack/images $(BIN)/imagetool github.com/trustplane/trustplane/hack/images github.com/trustplane/trustplane/hack/images/pause
	$(BIN)/imagetool/images -out $(BIN)/images -tag $(IMAGE_TAG) -trustplane $(BIN)/trustplane \
		-pause $(BIN)/imagetool/pause -version $(VERSION) -revision $(COMMIT) -created $(SOURCE_DATE_EPOCH)

.PHONY: run-program
run-program: ## Build bin/trustplane-run, the program behind make run (the trustplane CLI too, run as "trustplane").
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/trustplane-run ./hack/run

.PHONY: manifests
manifests: tools ## Generate deepcopy code, CRDs and RBAC from the Go markers; docs/configuration.md and the chart's values.schema.json from the flags.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crddescriptions config/crd/bases/*.yaml
	hack/gen-rbac.sh $(CONTROLLER_GEN)
	cp config/crd/bases/*.yaml charts/trustplane/crds/
	hack/chart-rbac.sh config/rbac/role.yaml > charts/trustplane/templates/clusterrole.yaml
	go run ./hack/configref docs/configuration.md charts/trustplane
	cp config/prometheus/trustplane-rules.yaml config/grafana/trustplane-dashboard.json charts/trustplane/files/

.PHONY: lint
lint: lint-tool ## Lint every Go package (golangci-lint pinned in hack/lint, config in .golangci.yml; go vet included).
	$(GOLANGCI_LINT) run ./...
	cd test/k8speers && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...
	cd hack/images && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...

.PHONY: fmt
fmt: ## gofmt every Go file.
	$$(go env GOROOT)/bin/gofmt -w $$(git ls-files '*.go')

.PHONY: k8s-bins
k8s-bins: ## Build kube-apiserver, etcd, kube-controller-manager and kubectl v1.37.1 into bin/k8s (once).
	hack/build-cached.sh hack/k8sbins $(K8S_BIN) \
		k8s.io/kubernetes/cmd/kube-apiserver ./etcd k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl

.PHONY: aggregation-oracle
aggregation-oracle: ## Build bin/k8speers/aggregationoracle (once), kube-controller-manager's ClusterRole aggregation as make chaos's oracle (test/k8speers/cmd/aggregationoracle).
	hack/build-cached.sh test/k8speers $(BIN)/k8speers ./cmd/aggregationoracle

.PHONY: node-bins
node-bins: ## Build kubelet, kube-proxy and kube-scheduler v1.37.1 into bin/node (once).
	hack/build-cached.sh hack/k8sbins $(BIN)/node k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler

# make run's real node: its Debian packages (as root), kubelet and the images. Where that
# cannot be (not root, not Linux), make run says why and runs sample-node as a stand-in.
.PHONY: node
node:
	@if hack/install-node-deps.sh; then $(MAKE) --no-print-directory node-bins images; fi

.PHONY: tools
tools: ## Build the pinned controller-gen and helm into bin/ (once).
	hack/build-cached.sh hack/tools $(BIN) sigs.k8s.io/controller-tools/cmd/controller-gen helm.sh/helm/v4/cmd/helm

.PHONY: vuln
vuln: vuln-tool $(VULNDB)/index/modules.json ## govulncheck ./... against the pinned offline database; fails on a reachable vulnerability.
	$(GOVULNCHECK) -db file://$(VULNDB) ./...

.PHONY: vuln-tool
vuln-tool: ## Build the pinned govulncheck into bin/vuln (once).
	hack/build-cached.sh hack/vuln $(BIN)/vuln golang.org/x/vuln/cmd/govulncheck

# Built once per VULNDB_VERSION from the module's data/osv, after checking its checksum.
$(VULNDB)/index/modules.json:
	info=$$(cd hack/vuln && GOFLAGS=-mod=mod go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION)); \
	sum=$$(echo "$$info" | sed -n 's/^\t"Sum": "\(.*\)",$$/\1/p'); dir=$$(echo "$$info" | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	if [ "$$sum" != "$(VULNDB_SUM)" ]; then echo "golang.org/x/vulndb@$(VULNDB_VERSION) has checksum '$$sum', want $(VULNDB_SUM)"; exit 1; fi; \
	rm -rf $(VULNDB).tmp && go run ./hack/vulndb "$$dir/data/osv" $(VULNDB).tmp $(VULNDB_VERSION) && rm -rf $(VULNDB) && mv $(VULNDB).tmp $(VULNDB)

.PHONY: lint-tool
lint-tool: ## Build the pinned golangci-lint into bin/lint (once).
	hack/build-cached.sh hack/lint $(BIN)/lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

##@ Robustness

CHAOS_FAULTS   ?= 300
CHAOS_DURATION ?= 75m
.PHONY: chaos
chaos: k8s-bins aggregation-oracle ## Inject CHAOS_FAULTS (300) faults from CHAOS_SEED (default: new) across all five systems, checking invariants (test/chaos; make test runs 2 minutes of it).
	CHAOS_FAULTS=$(CHAOS_FAULTS) CHAOS_DURATION=$(CHAOS_DURATION) go test -timeout 0 -count=1 -v -run '^TestChaos$$' ./test/chaos

# Not part of make test: each mutant is a chaos run of its own. MUTANTS=name,name runs some.
.PHONY: chaos-mutants
chaos-mutants: k8s-bins aggregation-oracle ## Prove the chaos suite catches the bugs it names: each patch of test/chaos/mutants applied to a scratch copy of the tree, a short chaos run must report its invariant violated.
	go run ./test/chaos/mutants/run $(if $(MUTANTS),-only $(MUTANTS))

##@ Benchmarks

BENCHES      := kubeconfig jwks jwks-server podcert podcert-propagation checksum aggregation memory
BENCH_RUNS   ?= 3
# BENCH_SCALES=1 runs only each bench's 1x size (no 10x, no growth rows): a quick check.
BENCH_SCALES ?=
BENCH_ROWS   := $(BIN)/bench/rows.jsonl
BENCH_SOURCE := $(BIN)/bench/source.json
BENCH_GO     := TRUSTPLANE_BENCH_SCALES=$(BENCH_SCALES) go run -tags bench
.PHONY: bench
bench: k8s-bins ## Every bench-* BENCH_RUNS (3) times on one commit, each at 1x and 10x (hours), then one table of each row's median and spread: printed, in bin/bench/latest.json and README's Benchmarks section.
	mkdir -p $(BIN)/bench && : > $(BENCH_ROWS) && : > $(BIN)/bench/timings.txt
	go run ./test/bench/table -begin $(BENCH_SOURCE)
	go build -o $(BIN)/bench/trustplane ./cmd/trustplane
	failed=""; for run in $$(seq 1 $(BENCH_RUNS)); do for b in $(BENCHES); do \
		echo "== make bench-$$b, run $$run of $(BENCH_RUNS)"; start=$$(date +%s); \
		TRUSTPLANE_BENCH_BINARY=$(BIN)/bench/trustplane TRUSTPLANE_BENCH_ROWS=$(BENCH_ROWS) TRUSTPLANE_BENCH_RUN=$$run \
			$(MAKE) --no-print-directory bench-$$b || failed="$$failed bench-$$b(run $$run)"; \
		echo "== make bench-$$b, run $$run of $(BENCH_RUNS): $$(( $$(date +%s) - start )) s" | tee -a $(BIN)/bench/timings.txt; \
	done; done; \
	go run ./test/bench/table -source $(BENCH_SOURCE) -runs $(BENCH_RUNS) -rows $(BENCH_ROWS) -json $(BIN)/bench/latest.json -readme README.md || failed="$$failed table"; \
	if [ -n "$$failed" ]; then echo "did not finish:$$failed"; exit 1; fi

.PHONY: bench-jwks
bench-jwks: k8s-bins ## JWKS: rotation latency, 1,000 and 10,000 sets at once (time, p50/p99, CPU, memory; floor, growth), resync writes.
	$(BENCH_GO) ./test/bench/jwks

.PHONY: bench-jwks-server
bench-jwks-server: k8s-bins ## JWKS server (trustplane jwks-server): cost per request by JWKSConfig size, memory per idle connection, the connection limit and idle timeout.
	$(BENCH_GO) ./test/bench/jwksserver

.PHONY: bench-aggregation
bench-aggregation: k8s-bins ## ClusterRole aggregation vs kube-controller-manager at 2,000 and 20,000 roles: convergence, writes, CPU; growth per role.
	$(BENCH_GO) ./test/bench/aggregation

.PHONY: bench-checksum
bench-checksum: k8s-bins ## Secret checksum: 50,000 and 500,000 Secrets in process (incremental vs full, growth); 30,000 through the API server (publish latency with the shipped quiet period vs a plain client waiting as long).
	$(BENCH_GO) ./test/bench/checksum

.PHONY: bench-podcert
bench-podcert: k8s-bins ## Pod certificates: refresh pass over 5,000 projections; signer at 2,000 and 20,000 requests (throughput, p50/p99, floor, growth).
	$(BENCH_GO) ./test/bench/podcert

.PHONY: bench-podcert-propagation
bench-podcert-propagation: k8s-bins node-test-deps ## Pod certificates on a real node (root, as test/node): a new CA from published in the ClusterTrustBundle to every pod's projected bundle file holding it, 10 and 30 pods, kubelet syncFrequency 10s and 1m (p50/max per pod and for every pod: the budget).
	$(BENCH_GO) ./test/bench/podcertpropagation

.PHONY: bench-kubeconfig
bench-kubeconfig: k8s-bins ## Kubeconfig operator: 200 requests at once against one target, 2,000 over 20; floor, growth, API requests per request.
	$(BENCH_GO) ./test/bench/kubeconfig

.PHONY: bench-memory
bench-memory: k8s-bins ## Secret caches: manager peak RSS with 400 Opaque Secrets holding a 900 KB tls.crt, vs. baseline.
	$(BENCH_GO) ./test/bench/memory

.PHONY: test-node-expiry
test-node-expiry: k8s-bins tools node-test-deps ## test/node with the hour a pod certificate needs to expire: the kubelet's CertificateExpired with its signer stopped (about 65 minutes; make test stops at CertificateOverdueForRefresh).
	TRUSTPLANE_NODE_EXPIRY=1 go test -count=1 -timeout 90m -v -run '^TestNode$$' ./test/node

.PHONY: fuzz
fuzz: k8s-bins ## Run every fuzz target of the tenant parsers for FUZZTIME each (default 1m; make test runs each for FUZZTIME_TEST, 3s).
	hack/fuzz.sh $(or $(FUZZTIME),1m)

# test/node needs a real node: its packages, kubelet and the images (as root; elsewhere
# test/node skips, saying why).
.PHONY: node-test-deps
node-test-deps:
	@if [ "$$(id -u)" = 0 ]; then hack/install-node-deps.sh && $(MAKE) --no-print-directory node-bins images; fi

.PHONY: test-deps
test-deps: ## Install the Debian packages tests run for real (nginx, openssl, prometheus for promtool) when missing.
	hack/install-test-deps.sh

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
