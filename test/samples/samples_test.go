// Package samples follows, as a newcomer does, what `make run` and README say: it runs make
// run's program on its own local control plane, then every command make run prints and
// every command of README's samples table, with bash and the kubectl make run built. It
// checks that each command succeeds, that each system's sample reaches its Ready state,
// and that deleting the samples as printed takes them away so that they apply again.
package samples

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// cluster reaches make run's control plane as its admin, once make run has said where.
var cluster client.Client

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilds()
	os.Exit(code)
}

// readyTimeout bounds each wait for a sample's Ready state; the machine running the tests
// may be busy with other work.
const readyTimeout = 2 * time.Minute

// check proves that the samples in files work.
type check struct {
	files []string
	run   func(t *testing.T, r *run)
}

// checks covers every file in config/samples, by system. A new sample file needs a check
// here, or TestEverySampleFileIsChecked fails.
var checks = map[string]check{
	"namespaces":              {files: []string{"00-namespaces.yaml"}, run: checkNamespaces},
	"jwks":                    {files: []string{"issuer-tls-secret.yaml", "jwks_v1alpha1_jwksconfig.yaml"}, run: checkJWKS},
	"clusterrole-aggregation": {files: []string{"rbac_clusterrole-aggregation.yaml"}, run: checkClusterRoleAggregation},
	"role-aggregation":        {files: []string{"rbac_role-aggregation.yaml"}, run: checkRoleAggregation},
	"secret-checksum":         {files: []string{"checksum_versioned-tls-secrets.yaml"}, run: checkSecretChecksum},
	"secret-checksum-gateway": {files: []string{"checksum_gateway.yaml"}, run: checkGateway},
	"pod-certificates":        {files: []string{"podcert_pods.yaml"}, run: checkPodCertificates},
	"kubeconfig":              {files: []string{"operator_v1alpha1_cluster.yaml"}, run: checkKubeconfig},
	"subscription":            {files: []string{"controlplane_v1alpha1_subscriptionrequest.yaml"}, run: checkSubscription},
}

// run is what the checks look at: the samples as written, and where make run's
// processes put what they serve.
type run struct {
	samples  *sampleSet
	jwksAddr string
	podCerts string
	// standIn says make run had no real node (not root, no containerd): sample-node
	// is a stand-in and pods do not run.
	standIn bool
}

func samplesDir() string { return filepath.Join(testenv.RepoRoot(), "config", "samples") }

// TestEverySampleFileIsChecked keeps checks and config/samples in step: a sample nobody
// checks is a sample that may not work.
func TestEverySampleFileIsChecked(t *testing.T) {
	entries, err := os.ReadDir(samplesDir())
	if err != nil {
		t.Fatal(err)
	}
	var present, checked []string
	for _, e := range entries {
		present = append(present, e.Name())
	}
	for _, c := range checks {
		checked = append(checked, c.files...)
	}
	sort.Strings(checked)
	for _, name := range present {
		if !slices.Contains(checked, name) {
			t.Errorf("config/samples/%s is checked by nothing: add it to a check in test/samples", name)
		}
	}
	for _, name := range checked {
		if !slices.Contains(present, name) {
			t.Errorf("test/samples checks config/samples/%s, which does not exist", name)
		}
	}
}

// TestSamplesFollowingTheHints is the README's promise, kept the way a newcomer would
// keep it: `make run`, then every command it prints (and those of README's samples table)
// in order. Each must succeed, every system's sample gets to Ready, and `kubectl delete -f
// config/samples/` takes everything away so that applying the samples works again.
func TestSamplesFollowingTheHints(t *testing.T) {
	samples := loadSamples(t)
	mr := startMakeRun(t)
	r := &run{samples: samples, jwksAddr: mr.addrs.JWKS, podCerts: localcp.PodCertDir(mr.dir),
		standIn: strings.Contains(mr.process.Output(), "no real node")}
	t.Logf("make run's node: stand-in %v", r.standIn)
	g := parseGuide(t, mr.process.Output())
	sh := newShell()

	sh.run(t, g.setup...)
	if t.Failed() {
		t.FailNow()
	}
	cluster = clientOf(t, sh.getenv("KUBECONFIG"))
	t.Run("applied", func(t *testing.T) { runChecks(t, r) })
	t.Run("make run's hints", func(t *testing.T) { checkShown(t, samples, sh.run(t, g.lookAt...)) })
	t.Run("README's hints", func(t *testing.T) { checkShown(t, samples, sh.run(t, readmeHints(t, mr.addrs, mr.dir)...)) })
	t.Run("kubectl version", func(t *testing.T) { checkVersions(t, sh) })

	// Applying again, as after editing a sample, leaves what the controllers wrote alone
	// (aggregated rules, a claimed credential's labels), not even undoing it for a moment,
	// and everything stays Ready.
	before := resourceVersions(t, samples, "ClusterRole", "Role", "Secret")
	sh.run(t, g.setup...)
	after := resourceVersions(t, samples, "ClusterRole", "Role", "Secret")
	for obj, rv := range before {
		if after[obj] != rv {
			t.Errorf("applying the samples again changed %s (resourceVersion %s → %s)", obj, rv, after[obj])
		}
	}
	t.Run("reapplied", func(t *testing.T) { runChecks(t, r) })

	// Without make run's kube-controller-manager and its stand-in for the samples' kubelet,
	// the Pod and the namespaces would stay Terminating, kubectl delete would never return
	// and applying again would fail.
	deleted := t.Run("deleted", func(t *testing.T) {
		sh.run(t, g.cleanUp...)
		checkGone(t, samples)
	})
	if !deleted {
		t.FailNow() // applying again would only meet namespaces still terminating
	}
	sh.run(t, g.setup...)
	t.Run("applied after deleting", func(t *testing.T) { runChecks(t, r) })
}

// checkGone: every sample object, namespaces and the Pod on the kubelet-less Node among
// them, is gone from the cluster.
func checkGone(t *testing.T, s *sampleSet) {
	t.Helper()
	for _, sample := range s.objects {
		if obj, ok := live(t, sample); ok {
			t.Errorf("%s %s is still there after kubectl delete (deleted at %v, finalizers %v)",
				sample.GetKind(), path.Join(sample.GetNamespace(), sample.GetName()), obj.GetDeletionTimestamp(), obj.GetFinalizers())
		}
	}
}

// checkVersions: `kubectl version` works against make run's control plane and reports the
// Kubernetes version hack/k8sbins pins, for kubectl and for the API server; the
// kube-controller-manager beside it is that version too.
func checkVersions(t *testing.T, sh *shell) {
	want := pinnedKubernetesVersion(t)
	stdout, stderr, err := sh.bash("kubectl version")
	if err != nil || stderr != "" {
		t.Fatalf("kubectl version: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, line := range []string{"Client Version: " + want, "Server Version: " + want} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("kubectl version does not say %q:\n%s", line, stdout)
		}
	}
	stdout, stderr, err = sh.bash("kube-controller-manager --version")
	if err != nil || stdout != "Kubernetes "+want+"\n" {
		t.Errorf("kube-controller-manager --version: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

// pinnedKubernetesVersion is the version of k8s.io/kubernetes that hack/k8sbins builds.
func pinnedKubernetesVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "k8sbins", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("hack/k8sbins/go.mod does not require k8s.io/kubernetes")
	}
	return string(m[1])
}

// resourceVersions maps the samples of the kinds to their live resourceVersions.
func resourceVersions(t *testing.T, s *sampleSet, kinds ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kind := range kinds {
		for _, sample := range s.ofKind(kind) {
			obj, ok := live(t, sample)
			if !ok {
				t.Fatalf("%s %s/%s is not in the cluster", kind, sample.GetNamespace(), sample.GetName())
			}
			out[kind+" "+sample.GetNamespace()+"/"+sample.GetName()] = obj.GetResourceVersion()
		}
	}
	return out
}

// makeRun is the program behind `make run`, running on its own local control plane.
type makeRun struct {
	process *testenv.Process
	dir     string
	addrs   localcp.Addresses
}

// startMakeRun runs make run's program as `make run` does, on a local control plane of its
// own (no $KUBECONFIG) in a directory and on ports of the test's, and waits for its guide.
func startMakeRun(t *testing.T) *makeRun {
	t.Helper()
	t.Setenv("KUBECONFIG", "")
	mr := &makeRun{
		dir:   t.TempDir(),
		addrs: localcp.Addresses{Metrics: testenv.FreeAddr(t), Probes: testenv.FreeAddr(t), JWKS: testenv.FreeAddr(t), NodeAgentMetrics: testenv.FreeAddr(t)},
	}
	bin := testenv.Build(t, "./hack/run", "trustplane-run")
	mr.process = testenv.StartProcess(t, bin, "--dir", mr.dir, "--bin-dir", assetsDir(),
		"--metrics-bind-address", mr.addrs.Metrics,
		"--health-probe-bind-address", mr.addrs.Probes,
		"--jwks-server-bind-address", mr.addrs.JWKS,
		"--node-agent-metrics-bind-address", mr.addrs.NodeAgentMetrics)
	mr.process.WaitHTTP200(t, "http://"+mr.addrs.Probes+"/readyz", readyTimeout)
	testenv.Eventually(t, "make run's guide", 30*time.Second, func() bool {
		return strings.Contains(mr.process.Output(), "Press Ctrl-C")
	})
	return mr
}

// assetsDir holds the control-plane binaries, as for every test.
func assetsDir() string {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		return assets
	}
	return filepath.Join(testenv.RepoRoot(), "bin", "k8s")
}

// clientOf is a client of the cluster a kubeconfig file names.
func clientOf(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("the kubeconfig make run told to export (%q): %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runChecks(t *testing.T, r *run) {
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) { checks[name].run(t, r) })
	}
}
