package slots

import (
	"testing"
	"time"
)

func TestAcquireStopsAtTheLimitPerKey(t *testing.T) {
	var s PerKey
	var releases []func()
	for range 2 {
		release, ok := s.Acquire("alice", 2)
		if !ok {
			t.Fatal("a free slot was refused")
		}
		releases = append(releases, release)
	}
	if _, ok := s.Acquire("alice", 2); ok {
		t.Fatal("a third slot of alice was given at limit 2")
	}
	if release, ok := s.Acquire("bob", 2); !ok {
		t.Fatal("bob was refused because alice's slots are taken")
	} else {
		release()
	}
	releases[0]()
	if _, ok := s.Acquire("alice", 2); !ok {
		t.Fatal("a released slot was not given again")
	}
	if got := s.InUse("alice"); got != 2 {
		t.Errorf("alice holds %d slots, want 2", got)
	}
	if _, ok := s.Acquire("carol", 0); !ok {
		t.Error("limit 0 refused a slot")
	}
}

func TestRetryAfterIsSpreadAroundRetry(t *testing.T) {
	lo, hi := Retry, time.Duration(0)
	for range 1000 {
		d := RetryAfter()
		if d < Retry/2 || d >= Retry*3/2 {
			t.Fatalf("RetryAfter() = %v, outside [%v, %v)", d, Retry/2, Retry*3/2)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	// Spread, not one value: objects that found no slot at once must not come back at once.
	if hi-lo < Retry/2 {
		t.Fatalf("1000 retries between %v and %v: not spread", lo, hi)
	}
}
