package install

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trustplane/trustplane/internal/cli"
	"github.com/trustplane/trustplane/internal/configfile"
	"github.com/trustplane/trustplane/internal/testenv"
)

// leftAtDefault are the fields testdata/every-field.yaml cannot set away from their
// defaults, and why.
var leftAtDefault = map[string]string{
	"DataplaneConfiguration namespace": "excludes namespaces, which is set",
}

// TestChartConfigReachesEveryProcess renders the chart with testdata/every-field.yaml,
// which sets every field of the manager's, the node agent's, the data-plane agent's and
// the JWKS server's configuration files to a value other than its default, runs each process with the args
// and the file the chart renders for it, and checks the configuration each one reports
// at start: every field has the file's value.
func TestChartConfigReachesEveryProcess(t *testing.T) {
	root := testenv.RepoRoot()
	objs := testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
		"--namespace", "trustplane-system", "-f", filepath.Join(root, "test/install/testdata/every-field.yaml")))
	files := map[string]string{}
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" && strings.HasSuffix(obj.GetName(), "-config") {
			data, _, _ := unstructured.NestedString(obj.Object, "data", "config.yaml")
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			files[obj.GetName()] = path
		}
	}
	processes := []struct {
		schema    *configfile.Schema
		configMap string
		args      []string
	}{
		{cli.ConfigSchemas()[0], "trustplane-manager-config", containerArgs(t, objs, "Deployment", "manager")},
		{cli.ConfigSchemas()[1], "trustplane-node-agent-config", containerArgs(t, objs, "DaemonSet", "node-agent")},
		// The sidecar goes into a gateway's pod (docs/checksum.md): --config is all it needs.
		{cli.ConfigSchemas()[2], "trustplane-dataplane-config", []string{"dataplane", "--config=/etc/trustplane/config/config.yaml"}},
		{cli.ConfigSchemas()[3], "trustplane-jwks-server-config", containerArgs(t, objs, "Deployment", "jwks-server")},
	}
	for _, p := range processes {
		t.Run(p.schema.Kind, func(t *testing.T) {
			file := files[p.configMap]
			if file == "" {
				t.Fatalf("the chart renders no ConfigMap %s", p.configMap)
			}
			want := expected(t, p.schema, file)
			args := []string{"--kubeconfig=" + env.AdminKubeconfig(t)}
			for _, a := range p.args {
				args = append(args, strings.Replace(a, "--config=/etc/trustplane/config/config.yaml", "--config="+file, 1))
			}
			got, ts := reportedConfiguration(t, args)
			// The file's logging section made the logger: rfc3339 times, not epoch seconds.
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				t.Errorf("the configuration line's ts is %q, not RFC 3339: logging.timeEncoding did not reach the logger", ts)
			}
			for path, value := range want {
				if got[path] != value {
					t.Errorf("%s: the process reports %q, the file says %q", path, got[path], value)
				}
			}
		})
	}
}

// expected is what a process reading file reports, with a check that the file sets every
// field away from its default.
func expected(t *testing.T, schema *configfile.Schema, file string) map[string]string {
	t.Helper()
	defaults := schema.Effective()
	if err := schema.Load(file, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	want := schema.Effective()
	for _, path := range schema.Paths() {
		if want[path] == defaults[path] && leftAtDefault[schema.Kind+" "+path] == "" {
			t.Errorf("testdata/every-field.yaml leaves %s of %s at its default %q", path, schema.Kind, defaults[path])
		}
	}
	return want
}

// reportedConfiguration runs trustplane with args until it logs its configuration, and
// returns the values and the line's time stamp as written.
func reportedConfiguration(t *testing.T, args []string) (map[string]string, string) {
	t.Helper()
	p := testenv.StartProcess(t, testenv.Binary(t), args...)
	defer func() { _, _ = p.Stop(10 * time.Second) }()
	var values map[string]string
	var ts string
	testenv.Eventually(t, "the configuration log line", 30*time.Second, func() bool {
		for _, line := range strings.Split(p.Output(), "\n") {
			var entry struct {
				Msg    string            `json:"msg"`
				Values map[string]string `json:"values"`
				TS     json.RawMessage   `json:"ts"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "configuration" {
				values = entry.Values
				_ = json.Unmarshal(entry.TS, &ts) // a number (epoch) leaves it empty
				return true
			}
		}
		if exited, _ := p.Exited(); exited {
			t.Fatalf("trustplane %s exited before reporting its configuration:\n%s", strings.Join(args, " "), p.Output())
		}
		return false
	})
	return values, ts
}

// containerArgs are the args of the first container of the rendered workload of kind
// whose name ends in suffix.
func containerArgs(t *testing.T, objs []*unstructured.Unstructured, kind, suffix string) []string {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && strings.HasSuffix(obj.GetName(), suffix) {
			return podTemplate(t, obj).Containers[0].Args
		}
	}
	t.Fatalf("the render has no %s *%s", kind, suffix)
	return nil
}

// TestChartValuesAreChecked: values.schema.json refuses a misspelt value, a config field
// that does not exist, a duration Go cannot read and a value a flag does not take (the
// node agent's layout, as a chart value and as a config field), at `helm template`.
func TestChartValuesAreChecked(t *testing.T) {
	root := testenv.RepoRoot()
	for set, want := range map[string]string{
		"replicaCont=3":                         "additional properties 'replicaCont' not allowed",
		"config.jwks.wrokers=3":                 "additional properties 'wrokers' not allowed",
		"config.jwks.retryBaseDelay=5min":       "'5min' does not match pattern",
		"nodeAgent.config.refreshInterval=soon": "'soon' does not match pattern",
		"config.cluster.workers=many":           "got string, want integer",
		"nodeAgent.layout=spife":                "value must be one of 'kubernetes', 'spiffe'",
		"nodeAgent.config.layout=SPIFFE":        "value must be one of 'kubernetes', 'spiffe'",
	} {
		cmd := exec.Command(testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"), "--namespace", "trustplane-system", "--set", set)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v, want a failure saying %q:\n%s", set, err, want, out)
		}
	}
}

// TestDeprecatedFlagNamesStillWork: a flag renamed to carry its controller's name keeps
// working under its old name in the process as shipped: it sets the same field, and the
// process says once which name replaced it.
func TestDeprecatedFlagNamesStillWork(t *testing.T) {
	p := testenv.StartProcess(t, testenv.Binary(t), "manager", "--kubeconfig="+env.AdminKubeconfig(t),
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
		"--podcert-signer-workers=3", "--secret-max-certificate-bytes=70000")
	defer func() { _, _ = p.Stop(10 * time.Second) }()
	var values map[string]string
	testenv.Eventually(t, "the configuration log line", 30*time.Second, func() bool {
		for _, line := range strings.Split(p.Output(), "\n") {
			var entry struct {
				Msg    string            `json:"msg"`
				Values map[string]string `json:"values"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "configuration" {
				values = entry.Values
				return true
			}
		}
		if exited, _ := p.Exited(); exited {
			t.Fatalf("trustplane manager exited before reporting its configuration:\n%s", p.Output())
		}
		return false
	})
	for field, want := range map[string]string{"podcertificateSigner.signerWorkers": "3", "tlsExpiry.secretMaxCertificateBytes": "70000"} {
		if values[field] != want {
			t.Errorf("%s = %q, want %q (set through the old flag name)", field, values[field], want)
		}
	}
	for _, warning := range []string{
		"Flag --podcert-signer-workers has been deprecated, use --podcertificate-signer-signer-workers",
		"Flag --secret-max-certificate-bytes has been deprecated, use --tls-expiry-secret-max-certificate-bytes",
	} {
		if n := strings.Count(p.Output(), warning); n != 1 {
			t.Errorf("%q printed %d times, want once:\n%s", warning, n, p.Output())
		}
	}
}
