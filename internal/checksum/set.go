package checksum

import (
	"crypto/md5" //nolint:gosec // the wire format
	"encoding"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Set is the IDs of one namespace, kept sorted as objects come and go, so that a change
// of one object costs a binary search and a slice move rather than re-parsing and
// re-sorting everything. Changes are merged into the order when the checksum (or the
// IDs) are next read: one by one when few, in one merge pass when many — an informer's
// initial list of N objects costs O(N log N), not N slice moves of O(N) each. The
// checksum is cached until the set changes.
type Set struct {
	mu sync.Mutex
	// byKey is every object's name and ID as of the last merge, sorted by name. A sorted
	// slice, not a map: a map's memory per object halves and doubles with its
	// power-of-two tables, a slice's stays the same at any size.
	byKey []entry
	// changed is what was put and removed since the last merge, by object name.
	changed map[string]change
	n       int      // objects in the set, merged or not
	sorted  []string // every ID as of the last merge, sorted; duplicates kept, as in the formula
	// added and removed are the IDs put and taken out since the last merge.
	added, removed []string
	sum            string // cached checksum; "" when stale
	// checkpoints[i] is the MD5 state after hashing sorted[:i*checkpointEvery]; a change
	// at position p keeps the ones before p, so only the hash from there on is redone.
	checkpoints [][]byte
}

// entry is an object's name and ID.
type entry struct{ key, id string }

// change is an object's ID since the last merge, or that it was removed.
type change struct {
	id      string
	removed bool
}

// checkpointEvery is the IDs between MD5 checkpoints (about 25 KiB of input).
const checkpointEvery = 512

// mergeOneByOne is the most pending changes merged by a binary search and a slice move
// each; more are merged in one pass over the sorted IDs.
const mergeOneByOne = 16

// NewSet returns an empty set.
func NewSet() *Set { return &Set{} }

// Put records key's ID, replacing its previous one; it reports whether anything changed.
func (s *Set) Put(key, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.lookupLocked(key); ok {
		if old == id {
			return false
		}
		s.removed = append(s.removed, old)
	} else {
		s.n++
	}
	s.recordLocked(key, change{id: id})
	s.added = append(s.added, id)
	return true
}

// Remove forgets key; it reports whether it was there.
func (s *Set) Remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.lookupLocked(key)
	if !ok {
		return false
	}
	s.recordLocked(key, change{removed: true})
	s.removed = append(s.removed, old)
	s.n--
	return true
}

// lookupLocked is key's ID, the latest change first.
func (s *Set) lookupLocked(key string) (string, bool) {
	if c, ok := s.changed[key]; ok {
		return c.id, !c.removed
	}
	if i, found := slices.BinarySearchFunc(s.byKey, key, byName); found {
		return s.byKey[i].id, true
	}
	return "", false
}

func byName(e entry, key string) int { return strings.Compare(e.key, key) }

func (s *Set) recordLocked(key string, c change) {
	if s.changed == nil {
		s.changed = map[string]change{}
	}
	s.changed[key] = c
	s.sum = ""
}

// mergeKeysLocked brings byKey up to date with the changes: one by one when few, else
// in one pass. The map of changes goes with them (it held a whole initial list).
func (s *Set) mergeKeysLocked() {
	if len(s.changed) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(s.changed))
	if len(keys) <= mergeOneByOne {
		for _, key := range keys {
			c := s.changed[key]
			i, found := slices.BinarySearchFunc(s.byKey, key, byName)
			switch {
			case found && c.removed:
				s.byKey = slices.Delete(s.byKey, i, i+1)
			case found:
				s.byKey[i].id = c.id
			case !c.removed:
				s.byKey = slices.Insert(s.byKey, i, entry{key, c.id})
			}
		}
		s.changed = nil
		return
	}
	out := make([]entry, 0, s.n)
	k := 0
	for _, e := range s.byKey {
		for ; k < len(keys) && keys[k] < e.key; k++ {
			if c := s.changed[keys[k]]; !c.removed {
				out = append(out, entry{keys[k], c.id})
			}
		}
		if k < len(keys) && keys[k] == e.key {
			if c := s.changed[keys[k]]; !c.removed {
				out = append(out, entry{e.key, c.id})
			}
			k++
			continue
		}
		out = append(out, e)
	}
	for ; k < len(keys); k++ {
		if c := s.changed[keys[k]]; !c.removed {
			out = append(out, entry{keys[k], c.id})
		}
	}
	s.byKey, s.changed = out, nil
}

// mergeLocked brings sorted up to date with the pending changes.
func (s *Set) mergeLocked() {
	s.mergeKeysLocked()
	if len(s.added) == 0 && len(s.removed) == 0 {
		return
	}
	added, removed := cancelOut(s.added, s.removed)
	s.added, s.removed = nil, nil
	if len(added)+len(removed) <= mergeOneByOne {
		for _, id := range removed {
			s.removeSorted(id)
		}
		for _, id := range added {
			i := sort.SearchStrings(s.sorted, id)
			s.sorted = append(s.sorted, "")
			copy(s.sorted[i+1:], s.sorted[i:])
			s.sorted[i] = id
			s.invalidateFrom(i)
		}
		return
	}
	// One pass: the old order without the removed IDs, the added ones merged in.
	out := make([]string, 0, len(s.sorted)+len(added)-len(removed))
	first := -1
	mark := func() {
		if first < 0 {
			first = len(out)
		}
	}
	a, r := 0, 0
	for _, id := range s.sorted {
		for a < len(added) && added[a] < id {
			mark()
			out = append(out, added[a])
			a++
		}
		for r < len(removed) && removed[r] < id {
			r++ // not in the order: nothing to take out
		}
		if r < len(removed) && removed[r] == id {
			mark()
			r++
			continue
		}
		out = append(out, id)
	}
	if a < len(added) {
		mark()
		out = append(out, added[a:]...)
	}
	s.sorted = out
	if first >= 0 {
		s.invalidateFrom(first)
	}
}

// cancelOut sorts both and drops the IDs that were added and removed again (as a
// multiset: duplicates count one by one).
func cancelOut(added, removed []string) (keptAdded, keptRemoved []string) {
	sort.Strings(added)
	sort.Strings(removed)
	a, r := 0, 0
	for a < len(added) && r < len(removed) {
		switch {
		case added[a] < removed[r]:
			keptAdded = append(keptAdded, added[a])
			a++
		case removed[r] < added[a]:
			keptRemoved = append(keptRemoved, removed[r])
			r++
		default:
			a++
			r++
		}
	}
	return append(keptAdded, added[a:]...), append(keptRemoved, removed[r:]...)
}

func (s *Set) removeSorted(id string) {
	i := sort.SearchStrings(s.sorted, id)
	if i < len(s.sorted) && s.sorted[i] == id {
		s.sorted = append(s.sorted[:i], s.sorted[i+1:]...)
		s.invalidateFrom(i)
	}
}

// invalidateFrom drops the cached sum and the checkpoints that cover position i.
func (s *Set) invalidateFrom(i int) {
	s.sum = ""
	if keep := i/checkpointEvery + 1; keep < len(s.checkpoints) {
		s.checkpoints = s.checkpoints[:keep]
	}
}

// checksumLocked hashes from the last valid checkpoint on, recording new checkpoints.
func (s *Set) checksumLocked() string {
	s.mergeLocked()
	if s.sum != "" {
		return s.sum
	}
	h := md5.New() //nolint:gosec // the wire format
	start := 0
	if n := len(s.checkpoints); n > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.checkpoints[n-1]); err == nil {
			start = (n - 1) * checkpointEvery
		} else {
			h.Reset()
			s.checkpoints = nil
		}
	}
	if start == 0 && len(s.checkpoints) == 0 {
		s.checkpoints = append(s.checkpoints, marshalState(h))
	}
	buf := make([]byte, 0, 64<<10)
	for j := start; j < len(s.sorted); j++ {
		if j > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, s.sorted[j]...)
		if (j+1)%checkpointEvery == 0 {
			h.Write(buf)
			buf = buf[:0]
			s.checkpoints = append(s.checkpoints, marshalState(h))
		} else if len(buf) > 60<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	s.sum = hex.EncodeToString(h.Sum(nil))
	return s.sum
}

func marshalState(h hash.Hash) []byte {
	state, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	return state
}

// Snapshot returns the sorted IDs and their checksum.
func (s *Set) Snapshot() (ids []string, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum = s.checksumLocked()
	return append([]string(nil), s.sorted...), sum
}

// Checksum is the set's checksum.
func (s *Set) Checksum() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checksumLocked()
}

// Len is the number of IDs.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
