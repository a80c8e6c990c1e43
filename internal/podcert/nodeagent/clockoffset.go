package nodeagent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// clockOffsetPoll is how often --testing-clock-offset-file is read again.
const clockOffsetPoll = 250 * time.Millisecond

// offsetClock is a clock plus an offset read from a file: the test hook behind
// --testing-clock-offset-file, with which the chaos suite jumps a running agent's clock.
// Go reads wall time through the vDSO, so neither faketime (LD_PRELOAD) nor a time
// namespace (which leaves CLOCK_REALTIME alone) can move a Go process's clock; the agent
// reads all its time through Options.Clock, so offsetting that one clock is the jump.
type offsetClock struct {
	base   clock.PassiveClock
	path   string
	offset atomic.Int64 // nanoseconds
	// seen is the file's content last applied or reported; only reload touches it.
	seen string
}

func newOffsetClock(base clock.PassiveClock, path string) *offsetClock {
	return &offsetClock{base: base, path: path}
}

func (c *offsetClock) Now() time.Time                  { return c.base.Now().Add(c.Offset()) }
func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Offset is the offset applied now.
func (c *offsetClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// reload reads the file and applies the duration it holds when it changed (a missing or
// empty file is an offset of 0), logging each change; a file that does not hold a Go
// duration is reported once and the offset kept.
func (c *offsetClock) reload(log logr.Logger) {
	raw, err := os.ReadFile(c.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if c.seen != "\x00unreadable" {
			log.Error(err, "TEST HOOK: reading --testing-clock-offset-file; the offset stays", "offset", c.Offset().String())
			c.seen = "\x00unreadable"
		}
		return
	}
	content := strings.TrimSpace(string(raw))
	if content == c.seen {
		return
	}
	c.seen = content
	offset := time.Duration(0)
	if content != "" {
		if offset, err = time.ParseDuration(content); err != nil {
			log.Error(err, "TEST HOOK: --testing-clock-offset-file does not hold a Go duration; the offset stays", "file", c.path, "offset", c.Offset().String())
			return
		}
	}
	c.offset.Store(int64(offset))
	log.Info("TEST HOOK: the agent's clock offset changed", "file", c.path, "offset", offset.String())
}

// offsetFrom is base offset by the duration in path, followed until ctx ends; it says so
// loudly in the log, for a clock that is not the real one must never go unnoticed.
func offsetFrom(ctx context.Context, base clock.PassiveClock, path string) clock.PassiveClock {
	log := ctrl.Log.WithName("clock")
	log.Info("TEST HOOK: --testing-clock-offset-file is set: the agent's clock is offset by the duration in that file; never set it outside tests", "file", path)
	c := newOffsetClock(base, path)
	c.reload(log)
	go c.watch(ctx, log)
	return c
}

// watch reloads the file every clockOffsetPoll until ctx ends.
func (c *offsetClock) watch(ctx context.Context, log logr.Logger) {
	t := time.NewTicker(clockOffsetPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.reload(log)
		}
	}
}
