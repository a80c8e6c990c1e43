package checksum

import (
	"sort"
	"sync"
)

// Set is the IDs of one namespace, kept sorted as objects come and go, so that a change
// of one object costs a binary search and a slice move rather than re-parsing and
// re-sorting everything. The checksum is cached until the set changes.
type Set struct {
	mu     sync.Mutex
	byKey  map[string]string // object name → its ID
	sorted []string          // every ID, sorted; duplicates kept, as in the formula
	sum    string            // cached checksum; "" when stale
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{byKey: map[string]string{}} }

// Put records key's ID, replacing its previous one; it reports whether anything changed.
func (s *Set) Put(key, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byKey[key]; ok {
		if old == id {
			return false
		}
		s.removeSorted(old)
	}
	s.byKey[key] = id
	i := sort.SearchStrings(s.sorted, id)
	s.sorted = append(s.sorted, "")
	copy(s.sorted[i+1:], s.sorted[i:])
	s.sorted[i] = id
	s.sum = ""
	return true
}

// Remove forgets key; it reports whether it was there.
func (s *Set) Remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.byKey[key]
	if !ok {
		return false
	}
	delete(s.byKey, key)
	s.removeSorted(old)
	s.sum = ""
	return true
}

func (s *Set) removeSorted(id string) {
	i := sort.SearchStrings(s.sorted, id)
	if i < len(s.sorted) && s.sorted[i] == id {
		s.sorted = append(s.sorted[:i], s.sorted[i+1:]...)
	}
}

// Snapshot returns the sorted IDs and their checksum.
func (s *Set) Snapshot() (ids []string, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sum == "" {
		s.sum = sumSorted(s.sorted)
	}
	return append([]string(nil), s.sorted...), s.sum
}

// Checksum is the set's checksum.
func (s *Set) Checksum() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sum == "" {
		s.sum = sumSorted(s.sorted)
	}
	return s.sum
}

// Len is the number of IDs.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sorted)
}
