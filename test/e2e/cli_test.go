package e2e

import (
	"strings"
	"testing"

	"github.com/trustplane/trustplane/internal/testenv"
)

// TestHelpAndVersion: every command documents itself and exits 0.
func TestHelpAndVersion(t *testing.T) {
	bin := testenv.Binary(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"manager", "node-agent", "dataplane", "version"}},
		{[]string{"manager", "--help"}, []string{"--controllers", "--leader-elect", "--kubeconfig", "--graceful-shutdown-timeout", "--jwks-server-bind-address"}},
		{[]string{"node-agent", "--help"}, []string{"--node-name", "--dir", "--refresh-interval", "--kubeconfig", "--health-probe-bind-address"}},
		{[]string{"dataplane", "--help"}, []string{"--namespace", "--namespaces", "--dir", "--fail-open", "--reload-command", "--kubeconfig",
			// Tengine-Ingress's own class flags, under their own names.
			"--ingress-class ", "--controller-class ", "--watch-ingress-without-class", "--ingress-class-by-name", "--ignore-ingress-class"}},
		{[]string{"version", "--help"}, []string{"Print the version"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := testenv.RunCommand(t, bin, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help lacks %s:\n%s", w, stdout)
				}
			}
		})
	}
	stdout, _, code := testenv.RunCommand(t, bin, "version")
	if code != 0 || !strings.HasPrefix(stdout, "trustplane ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}

// TestBadInvocations: a missing required flag, or a bad one, exits 1 with one line naming
// it, before anything connects (no cluster is reachable at this kubeconfig).
func TestBadInvocations(t *testing.T) {
	bin := testenv.Binary(t)
	nowhere := "--kubeconfig=/nonexistent"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node-agent", nowhere}, "trustplane: --node-name is required"},
		{[]string{"node-agent", "--node-name=n1", "--dir=", nowhere}, "trustplane: --dir is required"},
		// No namespace is every namespace (as Tengine-Ingress); only --dir is required.
		{[]string{"dataplane", nowhere}, "trustplane: --dir is required"},
		{[]string{"dataplane", "--namespace=web", "--dir=", nowhere}, "trustplane: --dir is required"},
		{[]string{"dataplane", "--namespace=web", "--namespaces=web,edge", "--dir=/tmp/x", nowhere}, "trustplane: --namespace and --namespaces are mutually exclusive"},
		{[]string{"dataplane", "--namespace=web", "--dir=/tmp/x", "--quiet-period=soon", nowhere}, `invalid argument "soon" for "--quiet-period"`},
		{[]string{"manager", "--controllers=nosuch", nowhere}, `trustplane: unknown controller "nosuch" in --controllers`},
		{[]string{"manager", "--no-such-flag"}, "trustplane: unknown flag: --no-such-flag"},
		{[]string{"nosuchcommand"}, `trustplane: unknown command "nosuchcommand"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := testenv.RunCommand(t, bin, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr = %q, want %q", stderr, tc.want)
			}
		})
	}
}
