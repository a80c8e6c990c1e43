package status

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
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
