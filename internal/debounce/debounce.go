// Package debounce holds work back until its inputs have been quiet for a while.
package debounce

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Debouncer holds a key's work back until its inputs have been quiet for a while, but
// never longer than a maximum delay after the first unhandled change: a burst of changes
// costs one sync and at most one write.
type Debouncer struct {
	quiet, maxDelay time.Duration
	clock           clock.PassiveClock

	mu      sync.Mutex
	pending map[string]window
}

type window struct{ first, last time.Time }

// New returns a debouncer; quiet 0 syncs at once.
func New(quiet, maxDelay time.Duration, c clock.PassiveClock) *Debouncer {
	return &Debouncer{quiet: quiet, maxDelay: maxDelay, clock: c, pending: map[string]window{}}
}

// Touch records a change affecting name and says after how long to enqueue it.
func (d *Debouncer) Touch(name string) time.Duration {
	if d == nil || d.quiet <= 0 {
		return 0
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.pending[name]
	if !ok {
		w.first = now
	}
	w.last = now
	d.pending[name] = w
	return d.quiet
}

// Wait is how much longer name's sync must wait; 0 means sync now (and the window
// closes: a change from here on opens a new one).
func (d *Debouncer) Wait(name string) time.Duration {
	if d == nil || d.quiet <= 0 {
		return 0
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.pending[name]
	if !ok {
		return 0
	}
	due := w.last.Add(d.quiet)
	if deadline := w.first.Add(d.maxDelay); deadline.Before(due) {
		due = deadline
	}
	if wait := due.Sub(now); wait > 0 {
		return wait
	}
	delete(d.pending, name)
	return 0
}
