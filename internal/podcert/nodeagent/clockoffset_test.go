package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestClockOffsetFollowsTheFile: the clock is the base clock plus the duration the file
// holds, none while it is missing or empty; each change is logged once; a file that is
// not a duration keeps the last offset and is reported once; the watcher picks a change
// up while the agent runs.
func TestClockOffsetFollowsTheFile(t *testing.T) {
	base := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "offset")
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	c := newOffsetClock(base, path)
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, offset time.Duration) {
		t.Helper()
		if got := c.Now().Sub(base.Now()); got != offset {
			t.Errorf("%s: the clock is offset by %v, want %v", what, got, offset)
		}
		if c.Since(base.Now()) != offset {
			t.Errorf("%s: Since(base now) = %v, want %v", what, c.Since(base.Now()), offset)
		}
	}

	c.reload(log)
	expect("no file", 0)
	for _, step := range []struct {
		content string
		offset  time.Duration
	}{{"10m\n", 10 * time.Minute}, {"-10m", -10 * time.Minute}, {"ten minutes", -10 * time.Minute}, {"0s", 0}, {"", 0}} {
		write(step.content)
		c.reload(log)
		c.reload(log) // unchanged: nothing new in the log
		expect(strings.TrimSpace(step.content), step.offset)
	}
	want := []string{`"offset"="10m0s"`, `"offset"="-10m0s"`, `does not hold a Go duration`, `"offset"="0s"`, `"offset"="0s"`}
	if len(lines) != len(want) {
		t.Fatalf("log lines %q, want one per change: %q", lines, want)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("log line %d: %s, want %s", i, lines[i], w)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.watch(ctx, funcr.New(func(string, string) {}, funcr.Options{}))
	write("+10m")
	deadline := time.Now().Add(5 * time.Second)
	for c.Offset() != 10*time.Minute && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	expect("while watched", 10*time.Minute)
}
