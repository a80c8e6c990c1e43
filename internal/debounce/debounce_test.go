package debounce

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestDebouncer(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	d := New(200*time.Millisecond, time.Second, clk)
	if d.Wait("a") != 0 {
		t.Fatal("nothing pending must sync at once")
	}
	if got := d.Touch("a"); got != 200*time.Millisecond {
		t.Fatalf("Touch = %v", got)
	}
	if got := d.Wait("a"); got != 200*time.Millisecond {
		t.Fatalf("right after a change: wait %v", got)
	}
	// Changes keep coming every 100ms: the quiet period keeps moving, the max delay holds.
	for range 8 {
		clk.SetTime(clk.Now().Add(100 * time.Millisecond))
		d.Touch("a")
	}
	if got := d.Wait("a"); got != 200*time.Millisecond {
		t.Fatalf("during a burst: wait %v", got)
	}
	clk.SetTime(clk.Now().Add(200 * time.Millisecond)) // 1s after the first change
	if got := d.Wait("a"); got != 0 {
		t.Fatalf("at the max delay: wait %v, want 0", got)
	}
	if got := d.Wait("a"); got != 0 {
		t.Fatal("the window must close after a sync")
	}
	d.Touch("b")
	clk.SetTime(clk.Now().Add(200 * time.Millisecond))
	if got := d.Wait("b"); got != 0 {
		t.Fatalf("after a quiet period: wait %v", got)
	}
	if New(0, 0, clk).Touch("x") != 0 {
		t.Error("quiet 0 must not delay")
	}
}

// TestInputsSyncFirst: a key whose quiet period is over still waits while an input of
// it has a window open or is syncing, a quiet period at a time, and never past its own
// max delay.
func TestInputsSyncFirst(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	d := New(time.Second, 10*time.Second, clk)
	admin := func() time.Duration {
		wait, done := d.WaitInOrder("admin", func() []string { return []string{"edit", "admin"} }) // admin reads edit (and itself)
		done()
		return wait
	}
	d.Touch("admin")
	d.Touch("edit")
	if wait, _ := d.WaitInOrder("admin", func() []string { t.Error("inputs asked for within the quiet period"); return nil }); wait != time.Second {
		t.Fatalf("admin right after its change: wait %v, want 1s", wait)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if got := admin(); got != time.Second {
		t.Fatalf("admin while its input edit waits: wait %v, want 1s", got)
	}
	wait, editDone := d.WaitInOrder("edit", func() []string { return nil })
	if wait != 0 {
		t.Fatalf("edit, quiet: wait %v", wait)
	}
	if got := admin(); got != time.Second {
		t.Fatalf("admin while edit syncs: wait %v, want 1s", got)
	}
	editDone()
	if got := admin(); got != 0 {
		t.Fatalf("admin once edit has synced: wait %v", got)
	}

	changed := clk.Now()
	d.Touch("admin")
	for range 12 { // edit keeps changing: admin waits up to its max delay, not longer
		clk.SetTime(clk.Now().Add(time.Second))
		d.Touch("edit")
		if admin() == 0 {
			break
		}
	}
	if got := clk.Now().Sub(changed); got != 10*time.Second {
		t.Errorf("admin synced %v after its change, want at its 10s max delay", got)
	}
}
