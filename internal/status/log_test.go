package status

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestTerminalErrorsAreLoggedAsInfo: a stalled outcome, as controller-runtime logs it
// ("Reconciler error" with a terminal error), becomes an info line with its reason; any
// other error stays an error.
func TestTerminalErrorsAreLoggedAsInfo(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
	log := QuietTerminalErrors(base).WithName("controller").WithValues("object", "ns/x")

	log.Error(reconcile.TerminalError(Stalled("InvalidSpec", "spec.cacheMaxAge: 5d is not a duration")), "Reconciler error")
	log.Error(errors.New("connection refused"), "Reconciler error")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	// funcr writes info lines with "level" and error lines without it.
	if !strings.Contains(lines[0], `"level"=0`) || !strings.Contains(lines[0], `"reason"="InvalidSpec"`) || !strings.Contains(lines[0], "stalled") {
		t.Errorf("terminal error line: %s", lines[0])
	}
	if strings.Contains(lines[1], `"level"`) || !strings.Contains(lines[1], `"error"="connection refused"`) || strings.Contains(lines[1], "stalled") {
		t.Errorf("plain error line: %s", lines[1])
	}
	if !strings.Contains(lines[0], `"object"="ns/x"`) || !strings.Contains(lines[0], "controller") {
		t.Errorf("names and values lost: %s", lines[0])
	}
}

// TestNamespaceTerminatingIsNotAnError: the API server's refusal to create an Event in a
// namespace being deleted (client-go's event broadcaster logs it as "Server rejected
// event") is logged at V(1), not as an error with a stack trace; another Forbidden stays
// an error.
func TestNamespaceTerminatingIsNotAnError(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 1})
	log := QuietTerminalErrors(base)

	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x.1",
		errors.New("unable to create new content in namespace gone because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace gone is being terminated", Field: "metadata.namespace"})
	log.Error(terminating, "Server rejected event (will not retry!)")
	log.Error(apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("RBAC")), "Reconciler error")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	if !strings.Contains(lines[0], `"level"=1`) || !strings.Contains(lines[0], "being deleted") {
		t.Errorf("namespace terminating line: %s", lines[0])
	}
	if strings.Contains(lines[1], `"level"`) {
		t.Errorf("another Forbidden is no longer an error: %s", lines[1])
	}
}
