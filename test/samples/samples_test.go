// Package samples applies config/samples as a newcomer does after `make run` — every file,
// with the real kubectl — to `trustplane manager` and `trustplane node-agent` run as
// processes with the flags make run passes, after preparing what make run prepares, and
// checks that each system's sample reaches its Ready state.
package samples

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

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
	"pod-certificates":        {files: []string{"podcert_node-and-pod.yaml"}, run: checkPodCertificates},
	"kubeconfig":              {files: []string{"operator_v1alpha1_cluster.yaml"}, run: checkKubeconfig},
	"subscription":            {files: []string{"controlplane_v1alpha1_subscriptionrequest.yaml"}, run: checkSubscription},
}

// run is what the checks look at: the samples as written, and where make run's
// processes put what they serve.
type run struct {
	samples  *sampleSet
	jwksAddr string
	podCerts string
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

// TestSamplesBecomeReady is the README's promise: after make run, `kubectl apply -f
// config/samples/` works in one go and every system does its part.
func TestSamplesBecomeReady(t *testing.T) {
	samples := loadSamples(t)
	r := startLikeMakeRun(t)
	r.samples = samples

	kubectlApply(t)
	runChecks(t, r)

	// Applying again, as after editing a sample, leaves what the controllers wrote alone
	// (aggregated rules, a claimed credential's labels), not even undoing it for a moment,
	// and everything stays Ready.
	before := resourceVersions(t, samples, "ClusterRole", "Role", "Secret")
	kubectlApply(t)
	after := resourceVersions(t, samples, "ClusterRole", "Role", "Secret")
	for obj, rv := range before {
		if after[obj] != rv {
			t.Errorf("applying the samples again changed %s (resourceVersion %s → %s)", obj, rv, after[obj])
		}
	}
	t.Run("reapplied", func(t *testing.T) { runChecks(t, r) })
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

// startLikeMakeRun prepares the cluster as make run does and starts the manager and the
// node agent as processes of the built binary, with make run's flags and free ports.
func startLikeMakeRun(t *testing.T) *run {
	t.Helper()
	if err := localcp.WriteSampleClusterKubeconfig(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	// The test environment installed the CRDs, as make run does; the policies too.
	policies, err := config.Policies()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcp.InstallPolicies(context.Background(), env.Client, policies); err != nil {
		t.Fatal(err)
	}
	bin := testenv.Binary(t)
	kubeconfig := env.AdminKubeconfig(t)
	addrs := localcp.Addresses{Metrics: testenv.FreeAddr(t), Probes: testenv.FreeAddr(t), JWKS: testenv.FreeAddr(t)}
	podCerts := localcp.PodCertDir(t.TempDir())
	manager := testenv.StartProcess(t, bin, localcp.ManagerArgs(kubeconfig, addrs)...)
	testenv.StartProcess(t, bin, localcp.NodeAgentArgs(kubeconfig, podCerts)...)
	manager.WaitHTTP200(t, "http://"+addrs.Probes+"/readyz", readyTimeout)
	return &run{jwksAddr: addrs.JWKS, podCerts: podCerts}
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

// kubectlApply applies the whole folder with the real kubectl, which must say nothing on
// stderr: no error, and no warning a newcomer would stumble over.
func kubectlApply(t *testing.T) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(testenv.RepoRoot(), "bin", "k8s")
	}
	cmd := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", env.AdminKubeconfig(t), "apply", "-f", "config/samples/")
	cmd.Dir = testenv.RepoRoot()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("kubectl apply -f config/samples/: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	t.Logf("kubectl apply -f config/samples/:\n%s", out)
}
