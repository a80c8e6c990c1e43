#!/usr/bin/env bash
# Prints the -ldflags that stamp the Kubernetes version into kube-apiserver,
# kube-controller-manager and kubectl, as Kubernetes' own build does
# (kube::version::ldflags in hack/lib/version.sh of k8s.io/kubernetes). Without them the
# binaries report the in-tree placeholder v0.0.0-master+$Format:%H$, which kubectl version
# cannot parse ("could not parse pre-release"). hack/build-cached.sh runs it from this
# directory; the values come from the k8s.io/kubernetes requirement in go.mod, so bumping
# that pin restamps the binaries.
set -euo pipefail
read -r version released < <(go list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
if [[ ! $version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
  echo "hack/k8sbins/ldflags.sh: k8s.io/kubernetes $version is not a release version vX.Y.Z" >&2
  exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  printf -- '-X %s.%s=%s ' \
    "$pkg" gitVersion "$version" \
    "$pkg" gitMajor "$major" \
    "$pkg" gitMinor "$minor" \
    "$pkg" buildDate "$released"
  # The module zip carries no git commit: empty rather than git archive's unexpanded
  # $Format:%H$ placeholder (and, like Kubernetes without a commit, no tree state).
  printf -- '-X %s.gitCommit= ' "$pkg"
done
echo
