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
