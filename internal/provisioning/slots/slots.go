// Package slots shares a controller's workers fairly between tenants: at most a given
// number of reconciles per key (a namespace) at a time.
//
// Workers alone do not make fair work: with eight workers, eight objects of one tenant
// whose target never answers hold all eight until they time out, and every other tenant
// waits. With at most a few of them per namespace at a time, the other workers stay free.
package slots

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Retry is how soon, on average, an object whose key had no free slot is looked at again
// when nothing wakes it: short, since a slot frees as soon as one of that key's
// reconciles ends, and cheap, since nothing but the informer cache is read before the
// slot is taken. Nothing was done, so a reconcile that found no slot returns
// RequeueAfter: Requeue() and no error (no backoff to grow).
const Retry = 500 * time.Millisecond

// retryAfter is Retry, spread evenly from half of it to one and a half: objects that
// found no slot at once do not come back all at once.
func retryAfter() time.Duration {
	return Retry/2 + rand.N(Retry) //nolint:gosec // G404: a spread of retry times, not a secret
}

// Requeue is when an object that found no free slot of s is looked at again: with a
// Wake, Fallback, spread like retryAfter (it is woken as soon as a slot is kept for it;
// the requeue only catches a wake that was lost); without, retryAfter().
func (s *PerKey) Requeue() time.Duration {
	if s.Wake != nil {
		return Fallback/2 + rand.N(Fallback) //nolint:gosec // G404: a spread of retry times, not a secret
	}
	return retryAfter()
}

// Fallback is how soon, on average, a waiting object is looked at again although no wake
// came (one dropped at shutdown, a slot kept for an object whose reconcile failed first).
const Fallback = 10 * time.Second

// PerKey counts the reconciles in flight per key, and the objects that wait for a slot
// of it. The zero value is ready to use.
//
// Waiting objects are woken in turn: with Wake set, the slot a release frees is kept for
// the object that has waited longest, and Wake brings it back (make bench-kubeconfig,
// 200 requests of one namespace with 4 slots: retried every half second instead, the
// slots stood idle between the end of one reconcile and the retry of the next, 1.4 times
// the time of a plain client writing with 4 goroutines).
type PerKey struct {
	// Wake, when set (before the first Acquire), brings the named object back (of
	// namespace key): a slot of key is kept for it. It must not block. A controller may
	// call it too, to bring back an object that waits for something else.
	Wake func(key, name string)

	mu    sync.Mutex
	inUse map[string]int // slots taken or kept, per key
	// waiting are the objects waiting per key, oldest first; kept the names a freed slot
	// is kept for, per key.
	waiting map[string][]string
	kept    map[string]map[string]bool
}

// Acquire takes a slot of key for the object name: the one kept for it, or a free one if
// fewer than limit are taken (a limit of 0 is no limit); release gives it back. When
// none is free, the object waits (with Wake set) until a release keeps one for it.
func (s *PerKey) Acquire(key, name string, limit int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse == nil {
		s.inUse, s.waiting, s.kept = map[string]int{}, map[string][]string{}, map[string]map[string]bool{}
	}
	switch {
	case s.kept[key][name]:
		delete(s.kept[key], name) // still counted in inUse
	case limit > 0 && s.inUse[key] >= limit:
		if s.Wake != nil && !slices.Contains(s.waiting[key], name) {
			s.waiting[key] = append(s.waiting[key], name)
		}
		return nil, false
	default:
		s.inUse[key]++
	}
	s.stopWaiting(key, name)
	var once sync.Once
	return func() { once.Do(func() { s.free(key) }) }, true
}

// Cancel gives up what the object name holds of key: its place among the waiting, and the
// slot kept for it, if any, which goes to the next. For an object found gone.
func (s *PerKey) Cancel(key, name string) {
	s.mu.Lock()
	wasKept := s.kept[key][name]
	delete(s.kept[key], name)
	s.stopWaiting(key, name)
	s.mu.Unlock()
	if wasKept {
		s.free(key)
	}
}

// free gives a slot of key back, or keeps it for the object that has waited longest and
// wakes that.
func (s *PerKey) free(key string) {
	s.mu.Lock()
	var next string
	if waiting := s.waiting[key]; len(waiting) > 0 {
		next = waiting[0]
		s.stopWaiting(key, next)
		if s.kept[key] == nil {
			s.kept[key] = map[string]bool{}
		}
		s.kept[key][next] = true
	} else if s.inUse[key]--; s.inUse[key] == 0 {
		delete(s.inUse, key)
		delete(s.kept, key)
	}
	s.mu.Unlock()
	if next != "" {
		s.Wake(key, next)
	}
}

// stopWaiting takes name off key's waiting list. s.mu is held.
func (s *PerKey) stopWaiting(key, name string) {
	if i := slices.Index(s.waiting[key], name); i >= 0 {
		s.waiting[key] = slices.Delete(s.waiting[key], i, i+1)
	}
	if len(s.waiting[key]) == 0 {
		delete(s.waiting, key)
	}
}

// InUse is the number of slots of key taken (or kept for a woken object) now.
func (s *PerKey) InUse(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse[key]
}

// Waiting is the number of objects waiting for a slot of key now.
func (s *PerKey) Waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting[key])
}

// ValidateFlags checks a controller's worker and retry flags, named after its flag prefix
// (--<prefix>-workers, --<prefix>-workers-per-namespace, --<prefix>-retry-base-delay,
// --<prefix>-retry-max-delay), in one line.
func ValidateFlags(prefix string, workers, perNamespace int, retryBase, retryMax time.Duration) error {
	switch {
	case workers < 1:
		return fmt.Errorf("--%s-workers must be positive, not %d", prefix, workers)
	case perNamespace < 1 || perNamespace > workers:
		return fmt.Errorf("--%s-workers-per-namespace must be between 1 and --%s-workers (%d), not %d", prefix, prefix, workers, perNamespace)
	case retryBase <= 0:
		return fmt.Errorf("--%s-retry-base-delay must be positive, not %v", prefix, retryBase)
	case retryMax < retryBase:
		return fmt.Errorf("--%s-retry-max-delay must be at least --%s-retry-base-delay (%v), not %v", prefix, prefix, retryBase, retryMax)
	}
	return nil
}
