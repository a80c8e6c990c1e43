package cluster

import (
	"sync"
	"time"
)

// slotRetry is how soon a Cluster whose namespace had no free slot is looked at again:
// short, since a slot frees as soon as one of that namespace's reconciles ends, and cheap,
// since nothing but the informer cache is read before the slot is taken.
const slotRetry = 500 * time.Millisecond

// namespaceSlots counts the reconciles in flight per namespace. Workers alone do not make
// fair work: with eight workers, eight Clusters of one tenant at a server that never
// answers hold all eight until they time out, and every other tenant waits. With at most
// --cluster-workers-per-namespace of them at a time, the other workers stay free.
type namespaceSlots struct {
	mu    sync.Mutex
	inUse map[string]int
}

// acquire takes a slot of namespace if fewer than limit are taken; release gives it back.
// A limit of 0 is no limit.
func (s *namespaceSlots) acquire(namespace string, limit int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse == nil {
		s.inUse = map[string]int{}
	}
	if limit > 0 && s.inUse[namespace] >= limit { // 0: no limit (a Reconciler made without Options)
		return nil, false
	}
	s.inUse[namespace]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.inUse[namespace]--; s.inUse[namespace] == 0 {
			delete(s.inUse, namespace)
		}
	}, true
}
