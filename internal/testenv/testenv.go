// Package testenv starts the real kube-apiserver and etcd (built from source into bin/k8s by
// `make k8s-bins`) for a package's tests, with every trustplane CRD installed. Each test
// package starts one from its TestMain and shares it between its tests.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Env is a running test control plane.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is an uncached client with trustplane's scheme.
	Client client.Client

	env *envtest.Environment
}

// An Option shapes the control plane Start starts.
type Option func(*envtest.Environment)

// WithAPIServerFlag passes --name=value to kube-apiserver (the chaos suite's audit log).
func WithAPIServerFlag(name, value string) Option {
	return func(env *envtest.Environment) {
		if env.ControlPlane.APIServer == nil {
			env.ControlPlane.APIServer = &envtest.APIServer{}
		}
		env.ControlPlane.APIServer.Configure().Set(name, value)
	}
}

// Start starts kube-apiserver and etcd and installs the CRDs.
func Start(opts ...Option) (*Env, error) {
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(RepoRoot(), "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run `make k8s-bins` (make test does it)", assets)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
	}
	WidenServiceRange(&env.ControlPlane)
	for _, opt := range opts {
		opt(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting test control plane: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
}

// Stop stops the control plane and removes its data.
func (e *Env) Stop() error { return e.env.Stop() }

// Environment exposes the envtest environment, e.g. to add users with other permissions.
func (e *Env) Environment() *envtest.Environment { return e.env }

// Main is a TestMain body: it starts the control plane into *env, runs the tests (m is a
// *testing.M, or a wrapper that prepares more before running them), stops it.
func Main(m interface{ Run() int }, env **Env, opts ...Option) int {
	if fuzzing() {
		// A fuzz target needs no control plane, and every fuzz worker process runs
		// TestMain again: each would start (and leave behind) one.
		return m.Run()
	}
	e, err := Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = e
	code := m.Run()
	RemoveBuilds()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping test control plane:", err)
	}
	return code
}

// fuzzing says whether the test binary runs with -fuzz, as the coordinator or a worker.
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	fuzz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return (fuzz != nil && fuzz.Value.String() != "") || (worker != nil && worker.Value.String() == "true")
}

// RepoRoot is the directory holding this module's go.mod.
func RepoRoot() string {
	dir, _ := os.Getwd()
	for {
		if raw, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isTrustplaneModule(raw) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("testenv: not inside the trustplane module")
		}
		dir = parent
	}
}

func isTrustplaneModule(gomod []byte) bool {
	const want = "module github.com/trustplane/trustplane\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// WidenServiceRange gives the API server a cluster's usual Service range (10.96.0.0/12)
// instead of envtest's /24, which runs out of ClusterIPs after 253 Services.
func WidenServiceRange(cp *envtest.ControlPlane) {
	if cp.APIServer == nil {
		cp.APIServer = &envtest.APIServer{}
	}
	cp.APIServer.Configure().Set("service-cluster-ip-range", "10.96.0.0/12")
}

// Namespace creates a namespace for one test, named prefix-<random>, and returns its name.
func (e *Env) Namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		tb.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// DecodeYAML decodes a multi-document YAML stream (a kustomize or Helm render) into objects.
func DecodeYAML(tb testing.TB, raw []byte) []*unstructured.Unstructured {
	tb.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			tb.Fatalf("decoding YAML: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// RunManager starts a manager against the test control plane with what setup adds to
// it, and stops it when the test ends or stop is called. Each test may start its own:
// controller name validation is off, metrics and probes are not served; mutate may change
// the options (leader election, for a replica that does not lead).
func (e *Env) RunManager(tb testing.TB, setup func(ctrl.Manager) error, mutate ...func(*ctrl.Options)) (stop func()) {
	tb.Helper()
	opts := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, m := range mutate {
		m(&opts)
	}
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		tb.Fatal(err)
	}
	return Background(tb, mgr.Start)
}

// Background runs fn (a manager, an agent) until the test ends or stop is called; stop
// cancels fn's context and waits for it to return. An error it returns fails the test.
func Background(tb testing.TB, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("stopping a background run: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// Eventually polls cond every 20ms until it holds, failing the test after timeout. It is
// for what a test observes of the API server, nginx or files, never a stand-in for a
// controller's own waiting.
func Eventually(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// APIRequests sums the API server's own apiserver_request_total counter over the series
// whose label text satisfies match (nil: every series). Benchmarks count API calls with it.
func APIRequests(ctx context.Context, cfg *rest.Config, match func(labels string) bool) (int, error) {
	sums, err := APIRequestsBy(ctx, cfg, func(labels string) string {
		if match != nil && !match(labels) {
			return ""
		}
		return "matched"
	})
	return sums["matched"], err
}

// APIRequestsBy sums apiserver_request_total by the key each series' label text gives
// (series keyed "" are left out), from one reading of the API server's metrics: the
// counts of every key are of the same moment.
func APIRequestsBy(ctx context.Context, cfg *rest.Config, key func(labels string) string) (map[string]int, error) {
	sums, err := APIMetricBy(ctx, cfg, "apiserver_request_total", key)
	counts := make(map[string]int, len(sums))
	for k, v := range sums {
		counts[k] = int(v)
	}
	return counts, err
}

// APIMetricBy sums one of the API server's own metrics (a counter, or a histogram's
// _sum or _count) by the key each series' label text gives (series keyed "" are left
// out), from one reading of its /metrics.
func APIMetricBy(ctx context.Context, cfg *rest.Config, metric string, key func(labels string) string) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	prefix := metric + "{"
	sums := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		k := key(line[len(prefix):end])
		if k == "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		sums[k] += v
	}
	return sums, sc.Err()
}
