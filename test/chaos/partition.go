package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// leaseDuration is the leader Lease's duration (controller-runtime's default, which the
// manager keeps): after this long without a renewal another replica may take it.
const leaseDuration = 15 * time.Second

// partitionFault cuts the leader from the API server (netns.go) for longer than the
// Lease lasts, so the other replica takes over while the cut one still runs: it must
// stop leading (and writing) on its own, within the renew deadline, and must not write
// once the cut heals (judged from the audit log, audit.go). Nil when the replicas run
// without network namespaces.
func (h *Harness) partitionFault() []Fault {
	if len(h.nets) == 0 || h.nets[0] == nil {
		return nil
	}
	return []Fault{{Kind: "partition: leader cut from the API server", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
		return h.partitionLeader(ctx, leaseDuration+time.Duration(2000+rng.IntN(10000))*time.Millisecond)
	}}}
}

// partitionLeader cuts the leader (any replica when none leads yet) from the API server
// for d, then heals the cut.
func (h *Harness) partitionLeader(ctx context.Context, d time.Duration) (string, error) {
	i, what := h.leaderIndex()
	if i < 0 {
		return "", fmt.Errorf("no manager replica is running")
	}
	m, n := h.managers[i], h.nets[i]
	starts := m.Starts()
	if err := n.Partition(h.APIServerHost()); err != nil {
		return "", err
	}
	sleep(ctx, d)
	if err := n.Heal(); err != nil {
		return "", err
	}
	stepped := "still running"
	if m.Starts() > starts {
		stepped = "it exited (lease lost) and was started again"
	}
	return fmt.Sprintf("%s %s for %.1fs, %s", what, m.Name(), d.Seconds(), stepped), nil
}

// leaderIndex is the leader replica's index, or a running one's when none leads yet
// (-1: none runs).
func (h *Harness) leaderIndex() (int, string) {
	leader := h.leader()
	for i, m := range h.managers {
		if m == leader {
			return i, "leader"
		}
	}
	for i, m := range h.managers {
		if m.Running() {
			return i, "no leader yet; a replica"
		}
	}
	return -1, ""
}
