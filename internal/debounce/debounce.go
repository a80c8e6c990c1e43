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
	// syncing counts the syncs under way of each key that WaitInOrder let through.
	syncing map[string]int
}

type window struct{ first, last time.Time }

// New returns a debouncer; quiet 0 syncs at once.
func New(quiet, maxDelay time.Duration, c clock.PassiveClock) *Debouncer {
	return &Debouncer{quiet: quiet, maxDelay: maxDelay, clock: c, pending: map[string]window{}, syncing: map[string]int{}}
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
	wait, _ := d.wait(name, nil, false)
	return wait
}

// WaitInOrder is Wait for a key whose sync reads the results of inputs() (other keys of
// this debouncer): once name's window has been quiet, it waits on, a quiet period at a
// time, while one of them has a window open or is syncing, since syncing name before
// them would write a result they are about to change, and a change of theirs touches
// name again. Never past the max delay after name's first change. inputs is called only
// once the quiet period is over. When it returns 0, name counts as syncing until done is
// called.
func (d *Debouncer) WaitInOrder(name string, inputs func() []string) (wait time.Duration, done func()) {
	return d.wait(name, inputs, true)
}

// wait is Wait (inputs nil), and WaitInOrder when track is set.
func (d *Debouncer) wait(name string, inputs func() []string, track bool) (time.Duration, func()) {
	noop := func() {}
	if d == nil || d.quiet <= 0 {
		return 0, noop
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.pending[name]
	if ok {
		due := w.last.Add(d.quiet)
		if !due.After(now) && inputs != nil && d.anyBusy(name, inputs()) {
			due = now.Add(d.quiet)
		}
		if deadline := w.first.Add(d.maxDelay); deadline.Before(due) {
			due = deadline
		}
		if wait := due.Sub(now); wait > 0 {
			return wait, noop
		}
		delete(d.pending, name)
	}
	if !track {
		return 0, noop
	}
	d.syncing[name]++
	return 0, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.syncing[name]--; d.syncing[name] <= 0 {
			delete(d.syncing, name)
		}
	}
}

// anyBusy says whether one of inputs other than name has a window open or is syncing.
// d.mu is held.
func (d *Debouncer) anyBusy(name string, inputs []string) bool {
	for _, in := range inputs {
		if _, open := d.pending[in]; (open || d.syncing[in] > 0) && in != name {
			return true
		}
	}
	return false
}
