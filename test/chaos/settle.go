package chaos

import (
	"context"
	"sync"
	"time"
)

// settle waits for every supervised process to run and a leader to reconcile again,
// then lets every system check that it has settled, in parallel, all within
// SettleTimeout of the faults' end.
func (h *Harness) settle(ctx context.Context, systems []System, canary *canary) {
	by := time.Now().Add(h.SettleTimeout)
	h.settleBy.Store(&by)
	h.Eventually(ctx, "progress: every process running", func(context.Context) bool {
		h.procsMu.Lock()
		defer h.procsMu.Unlock()
		for _, p := range h.procs {
			if !p.Running() {
				return false
			}
		}
		return true
	})
	h.Check("progress: the manager reconciles again", canary.reconciled(ctx, "settle", time.Until(by)),
		"the canary JWKSConfig was not reconciled within %v of the faults' end", h.SettleTimeout)
	var wg sync.WaitGroup
	for _, s := range systems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			s.Settle(ctx, h)
			h.Logf("%s settled in %.1fs", s.Name(), time.Since(start).Seconds())
		}()
	}
	wg.Wait()
	h.judgeLeaderWrites()
}
