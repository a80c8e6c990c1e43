package chaos

import (
	"context"
	"math/rand/v2"
)

// A System drives the workload of one of trustplane's systems and checks its invariants.
// The harness calls Setup once before the managers start, then, while faults are
// injected, Step over and over from one goroutine (the workload) and Check over and over
// from another (the continuous invariants), and finally, after the faults have stopped and
// the processes run again, Settle once.
//
// Every API call may fail while a fault lasts (the API server restarts, etcd is paused):
// Step returns such an error (the harness counts it, it is not a violation) and Check
// skips what it could not read. Only h.Check and h.Eventually record invariant checks and
// violations; h.NotJudged counts a check that could not be judged (too many fail the run).
type System interface {
	// Name is a short name: "jwks", "kubeconfig", ... (CHAOS_SYSTEMS selects by it).
	Name() string
	// Setup creates what the workload starts from, before the managers start.
	Setup(ctx context.Context, h *Harness) error
	// Step performs one random change of the workload (rng is this system's own,
	// derived from the seed, so a replay makes the same choices).
	Step(ctx context.Context, h *Harness, rng *rand.Rand) error
	// Check checks the invariants that must hold at every moment.
	Check(ctx context.Context, h *Harness)
	// Settle waits, within h.SettleTimeout from its call, for every object to be Ready
	// (recording a progress check per object) and checks the invariants that hold once
	// the system has settled.
	Settle(ctx context.Context, h *Harness)
}

// ManagerArgs is implemented by a system that needs flags on `trustplane manager` (a
// garden kubeconfig, a pool namespace); they follow the Deployment's own args.
type ManagerArgs interface {
	ManagerArgs(h *Harness) []string
}

// Faults is implemented by a system that offers faults of its own (a target cluster
// unreachable, its agent killed) besides the harness's.
type Faults interface {
	Faults(h *Harness) []Fault
}

// A Fault is one kind of failure the scheduler injects.
type Fault struct {
	// Kind names it in the output and the recovery table: "kill-9 leader", ...
	Kind string
	// Inject injects the fault and returns once it is over (a paused etcd resumed, a
	// target reachable again, a killed process restarted by its supervisor); detail says
	// what it hit ("manager-1", "etcd for 3.2s").
	Inject func(ctx context.Context, h *Harness, rng *rand.Rand) (detail string, err error)
	// Recovered says whether what the fault hit works again; the harness polls it after
	// Inject returns and reports how long it took. Nil: the manager's leader reconciles
	// again (the harness's canary).
	Recovered func(ctx context.Context, h *Harness) bool
	// parts, for a fault made of others (overlapping), are the faults its last injection
	// injected: it has recovered once each of them has.
	parts func() []Fault
}
