package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// plugin installs the built binary as kubectl-trustplane in a directory of its own and
// returns the directory, to put first on PATH.
func plugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(testenv.Binary(t), filepath.Join(dir, "kubectl-trustplane")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubectl runs bin/k8s/kubectl with PATH starting at dir.
func kubectl(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKubectlPlugin: `kubectl trustplane get -A` runs the binary as a plugin; its help
// says so.
func TestKubectlPlugin(t *testing.T) {
	ns := env.Namespace(t, "plugin")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	kid := publishSet(t, cfg, newChain(t))
	dir := plugin(t)

	r := kubectl(t, dir, "trustplane", "get", "-A", "--kubeconfig", admin(t))
	found := false
	for _, l := range lines(r.stdout) {
		f := strings.Fields(l)
		found = found || len(f) > 3 && f[0] == ns && f[1] == "jwksconfig/issuer" && f[2] == "True" && strings.Contains(l, "kid="+kid[:12])
	}
	if !strings.HasPrefix(r.stdout, "NAMESPACE") || !found {
		t.Errorf("kubectl trustplane get -A lacks %s's JWKSConfig:\n%s", ns, r.stdout)
	}
	// Not-Ready objects first, and the exit status says whether there are any.
	sawReady, notReady := false, 0
	for _, l := range lines(r.stdout)[1:] {
		f := strings.Fields(l)
		isReady := len(f) > 2 && (f[1] == "True" || f[2] == "True")
		if !isReady {
			notReady++
			if sawReady {
				t.Errorf("a not-Ready object after Ready ones:\n%s", r.stdout)
			}
		}
		sawReady = sawReady || isReady
	}
	if (notReady > 0) != (r.code == 1) || (r.code != 0 && r.code != 1) {
		t.Errorf("exit %d with %d not Ready:\n%s\n%s", r.code, notReady, r.stdout, r.stderr)
	}
	out := kubectl(t, dir, "trustplane", "get", "jwksconfig", "issuer", "-n", ns, "--kubeconfig", admin(t)).ok(t)
	contains(t, out, "issuer   True    Published")

	for _, args := range [][]string{{"trustplane", "--help"}, {"trustplane", "get", "--help"}} {
		out := kubectl(t, dir, args...).ok(t)
		contains(t, out, "kubectl trustplane ")
		if strings.Contains(strings.ReplaceAll(out, "kubectl trustplane", ""), "  trustplane get") {
			t.Errorf("help of %v names the binary, not the plugin:\n%s", args, out)
		}
	}
	out = kubectl(t, dir, "plugin", "list").ok(t)
	contains(t, out, "kubectl-trustplane")
}

// TestHelp: every verb documents itself with an example.
func TestHelp(t *testing.T) {
	out := tpRaw(t, "--help").ok(t)
	contains(t, out, "Day 2", "Processes", "get", "describe", "kubeconfig", "rotate", "revoke", "reconcile", "jwks", "checksum", "podcert", "manager")
	for _, verb := range [][]string{{"get"}, {"describe"}, {"kubeconfig"}, {"rotate"}, {"revoke"}, {"reconcile"},
		{"jwks", "inspect"}, {"jwks", "verify"}, {"checksum", "diff"}, {"podcert", "inspect"}} {
		out := tpRaw(t, append(verb, "--help")...).ok(t)
		contains(t, out, "Examples:\n  trustplane "+verb[0])
		if verb[0] != "jwks" || verb[1] == "verify" {
			contains(t, out, "--kubeconfig", "--context")
		}
	}
}

// complete runs a completion request, the connection flags after the verb (its first
// two words, or three for jwks verify).
func complete(t *testing.T, args ...string) string {
	t.Helper()
	at := 2
	if args[1] == "jwks" {
		at = 3
	}
	with := append(append(append([]string{}, args[:at]...), "--kubeconfig", admin(t)), args[at:]...)
	return tpRaw(t, with...).ok(t)
}

// TestCompletion: shell completion of kinds and of object names read from the cluster.
func TestCompletion(t *testing.T) {
	ns := env.Namespace(t, "complete")
	for _, name := range []string{"alpha", "beta"} {
		create(t, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "x"}})
	}
	create(t, kubeconfigRequest(ns, "reader", "prod"))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "get", "jwksconfig", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "get", "jwksconfig", "-n", ns, "b"}, []string{"beta"}},
		{[]string{"__complete", "describe", "jwks", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "kubeconfig", "-n", ns, ""}, []string{"reader"}},
		{[]string{"__complete", "rotate", "kubeconfigrequest", "-n", ns, ""}, []string{"reader"}},
		{[]string{"__complete", "reconcile", "jwksconfig", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "jwks", "verify", "x", "-n", ns, "--jwksconfig", ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "get", "kubeconfig"}, []string{"kubeconfigrequest\tKubeconfigRequest (Clusters)"}},
	} {
		out := complete(t, tc.args...)
		got := lines(out)
		got = got[:len(got)-1] // the directive
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	out := complete(t, "__complete", "get", "")
	contains(t, out, "jwksconfig\tJWKSConfig (JWKS)", "signerca\t", "subscriptionrequest\t", ":4")
}
