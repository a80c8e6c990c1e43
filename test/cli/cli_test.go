// Package cli_test runs the day-2 verbs of trustplane (get, describe, kubeconfig, rotate,
// revoke, reconcile, jwks, checksum, podcert) as users run them: the binary built from
// ./cmd/trustplane, also as the kubectl plugin kubectl-trustplane, against a real API
// server with trustplane's CRDs. Objects and statuses are written directly, except where
// a verb's point is a controller's reaction (reconcile, rotate and revoke --wait, pod
// certificates): those controllers run in the test process.
package cli_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

// admin is a kubeconfig file of the test API server's admin.
func admin(t *testing.T) string {
	t.Helper()
	return env.AdminKubeconfig(t)
}

// result is what a run of the binary printed and its exit status.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

// tp runs the built trustplane with args and the admin's kubeconfig.
func tp(t *testing.T, args ...string) result {
	t.Helper()
	args = append(args, "--kubeconfig", admin(t))
	return tpRaw(t, args...)
}

// tpRaw runs the built trustplane with args as they are.
func tpRaw(t *testing.T, args ...string) result {
	t.Helper()
	stdout, stderr, code := testenv.RunCommand(t, testenv.Binary(t), args...)
	return result{args: args, stdout: stdout, stderr: stderr, code: code}
}

// ok fails the test unless the run exited 0; it returns stdout.
func (r result) ok(t *testing.T) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("trustplane %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails checks the run exited 1 with one line on stderr containing want, and no stack
// trace; it returns stdout.
func (r result) fails(t *testing.T, want string) string {
	t.Helper()
	if r.code != 1 {
		t.Errorf("trustplane %s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "trustplane: ") || !strings.Contains(lines[0], want) {
		t.Errorf("trustplane %s: stderr %q, want one line with %q", strings.Join(r.args, " "), r.stderr, want)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr has a stack trace: %s", r.stderr)
		}
	}
	return r.stdout
}

// contains fails the test for each of want that text lacks.
func contains(t *testing.T, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q:\n%s", w, text)
		}
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
}

// setStatus writes obj's status (its status subresource) as a controller would.
func setStatus(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
}

func readyCondition(status metav1.ConditionStatus, reason, message string) []metav1.Condition {
	return []metav1.Condition{{Type: conditions.Ready, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}}
}

// lines are the lines of text, without the trailing empty one.
func lines(text string) []string { return strings.Split(strings.TrimRight(text, "\n"), "\n") }
