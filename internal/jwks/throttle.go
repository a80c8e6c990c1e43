package jwks

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Throttle spaces out updates of one published set (seed: at most one ConfigMap update
// a minute, bursts batched). The first change after a quiet period goes through at once,
// so a normal rotation is published within a second; changes inside the window wait for
// its end and are folded into one write, since each reconcile publishes the latest state.
type Throttle struct {
	// Interval is the least time between two updates of one set; 0 turns throttling off.
	Interval time.Duration

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// NewThrottle returns a throttle with the given interval.
func NewThrottle(interval time.Duration) *Throttle {
	return &Throttle{Interval: interval, last: map[types.NamespacedName]time.Time{}}
}

// Wait is how long an update of id must wait; 0 means write now. Creating a set is
// never throttled.
func (t *Throttle) Wait(id types.NamespacedName, now time.Time, creating bool) time.Duration {
	if t.Interval <= 0 || creating {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.last[id]
	if !ok {
		return 0
	}
	if elapsed := now.Sub(last); elapsed < t.Interval {
		return t.Interval - elapsed
	}
	return 0
}

// Wrote records an update of id at now.
func (t *Throttle) Wrote(id types.NamespacedName, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last[id] = now
}

// Forget drops id's history (the JWKSConfig is gone).
func (t *Throttle) Forget(id types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, id)
}
