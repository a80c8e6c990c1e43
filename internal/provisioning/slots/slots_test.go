package slots

import (
	"testing"
	"time"
)

func TestAcquireStopsAtTheLimitPerKey(t *testing.T) {
	var s PerKey
	var releases []func()
	for range 2 {
		release, ok := s.Acquire("alice", "a", 2)
		if !ok {
			t.Fatal("a free slot was refused")
		}
		releases = append(releases, release)
	}
	if _, ok := s.Acquire("alice", "a", 2); ok {
		t.Fatal("a third slot of alice was given at limit 2")
	}
	if release, ok := s.Acquire("bob", "b", 2); !ok {
		t.Fatal("bob was refused because alice's slots are taken")
	} else {
		release()
	}
	releases[0]()
	if _, ok := s.Acquire("alice", "a", 2); !ok {
		t.Fatal("a released slot was not given again")
	}
	if got := s.InUse("alice"); got != 2 {
		t.Errorf("alice holds %d slots, want 2", got)
	}
	if _, ok := s.Acquire("carol", "c", 0); !ok {
		t.Error("limit 0 refused a slot")
	}
}

func TestRetryAfterIsSpreadAroundRetry(t *testing.T) {
	lo, hi := Retry, time.Duration(0)
	for range 1000 {
		d := retryAfter()
		if d < Retry/2 || d >= Retry*3/2 {
			t.Fatalf("retryAfter() = %v, outside [%v, %v)", d, Retry/2, Retry*3/2)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	// Spread, not one value: objects that found no slot at once must not come back at once.
	if hi-lo < Retry/2 {
		t.Fatalf("1000 retries between %v and %v: not spread", lo, hi)
	}
}

// TestAFreedSlotIsKeptForTheLongestWaiting: with Wake set, a release keeps its slot for
// the object that has waited longest and wakes it; nobody else takes that slot, and the
// woken object gets it although the key is at its limit.
func TestAFreedSlotIsKeptForTheLongestWaiting(t *testing.T) {
	var woken []string
	s := PerKey{Wake: func(key, name string) { woken = append(woken, key+"/"+name) }}
	hold, ok := s.Acquire("ns", "a", 1)
	if !ok {
		t.Fatal("a free slot was refused")
	}
	for _, name := range []string{"b", "c", "b"} { // b asks twice: it waits once
		if _, ok := s.Acquire("ns", name, 1); ok {
			t.Fatalf("%s got a slot at the limit", name)
		}
	}
	if got := s.Waiting("ns"); got != 2 {
		t.Fatalf("%d waiting, want 2 (b, c)", got)
	}
	hold()
	hold() // a second call changes nothing
	if len(woken) != 1 || woken[0] != "ns/b" {
		t.Fatalf("woken %v, want [ns/b], the longest waiting, once", woken)
	}
	if _, ok := s.Acquire("ns", "d", 1); ok {
		t.Fatal("a newcomer took the slot kept for b")
	}
	holdB, ok := s.Acquire("ns", "b", 1)
	if !ok {
		t.Fatal("b was refused the slot kept for it")
	}
	if got := s.InUse("ns"); got != 1 {
		t.Errorf("%d slots in use, want 1", got)
	}
	holdB()
	if len(woken) != 2 || woken[1] != "ns/c" {
		t.Fatalf("woken %v, want c next", woken)
	}
	// c is gone (its reconcile found it deleted): the slot kept for it goes to d.
	s.Cancel("ns", "c")
	if len(woken) != 3 || woken[2] != "ns/d" {
		t.Fatalf("woken %v, want d after c's cancel", woken)
	}
	holdD, ok := s.Acquire("ns", "d", 1)
	if !ok {
		t.Fatal("d was refused the slot kept for it")
	}
	holdD()
	if got, waiting := s.InUse("ns"), s.Waiting("ns"); got != 0 || waiting != 0 {
		t.Errorf("after every release: %d in use, %d waiting, want none", got, waiting)
	}
}

// TestWithoutWakeNobodyWaits: without Wake, an object that found no slot does not wait
// (it retries after retryAfter), and a release frees the slot for anyone.
func TestWithoutWakeNobodyWaits(t *testing.T) {
	var s PerKey
	hold, _ := s.Acquire("ns", "a", 1)
	if _, ok := s.Acquire("ns", "b", 1); ok {
		t.Fatal("b got a slot at the limit")
	}
	if got := s.Waiting("ns"); got != 0 {
		t.Fatalf("%d waiting without Wake, want 0", got)
	}
	hold()
	if _, ok := s.Acquire("ns", "c", 1); !ok {
		t.Fatal("a freed slot was kept although nobody is woken")
	}
	if d := s.Requeue(); d < Retry/2 || d >= Retry*3/2 {
		t.Errorf("Requeue() = %v without Wake, want retryAfter's", d)
	}
	s.Wake = func(string, string) {}
	if d := s.Requeue(); d < Fallback/2 {
		t.Errorf("Requeue() = %v with Wake, want Fallback's", d)
	}
}
