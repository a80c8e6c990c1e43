package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
	"time"
)

// recoveryTimeout bounds how long the run waits for a fault's recovery before going on;
// a slower recovery is printed, and Settle judges the end state.
const recoveryTimeout = 2 * time.Minute

// faults are the harness's own: the manager's leader killed or stopped, kube-apiserver
// restarted, the manager's requests answered 429 (apf.go), etcd paused, the leader cut
// from the API server (partition.go).
func (h *Harness) faults() []Fault {
	return append([]Fault{
		{Kind: "kill -9 leader", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			return h.signalLeader(syscall.SIGKILL)
		}},
		{Kind: "SIGTERM leader", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			return h.signalLeader(syscall.SIGTERM)
		}},
		{Kind: "kube-apiserver restart", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			down := time.Duration(rng.IntN(3000)) * time.Millisecond
			stopped, err := h.cp.restartAPIServer(ctx, down, time.Minute)
			return fmt.Sprintf("stopped in %.1fs, down %.1fs more", stopped.Seconds(), down.Seconds()), err
		}},
		{Kind: "API server answers 429", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			return h.throttleManager(ctx, rng)
		}},
		{Kind: "etcd paused", Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			d := time.Duration(1000+rng.IntN(5000)) * time.Millisecond
			return fmt.Sprintf("for %.1fs", d.Seconds()), h.cp.pauseEtcd(d)
		}},
	}, h.partitionFault()...)
}

// signalLeader sends sig to the leader replica (any running one when no replica has the
// Lease yet) and waits for its supervisor to start it again.
func (h *Harness) signalLeader(sig syscall.Signal) (string, error) {
	target := h.leader()
	what := "leader"
	if target == nil {
		for _, m := range h.managers {
			if m.Running() {
				target, what = m, "no leader yet; a replica"
				break
			}
		}
	}
	if target == nil {
		return "", fmt.Errorf("no manager replica is running")
	}
	if err := target.Restart(sig); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s", what, target.Name()), nil
}

// injectFaults injects faults chosen from the seed, one after the other with random gaps,
// until cfg.Faults were injected or cfg.Duration has passed; after each it waits for the
// recovery and records how long that took, per kind.
func (h *Harness) injectFaults(ctx context.Context, cfg Config, faults []Fault, canary *canary) map[string][]time.Duration {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	recoveries := map[string][]time.Duration{}
	end := time.Now().Add(cfg.Duration)
	for n := 1; (cfg.Faults == 0 || n <= cfg.Faults) && time.Now().Before(end); n++ {
		sleep(ctx, time.Duration(500+rng.IntN(2500))*time.Millisecond)
		f := faults[rng.IntN(len(faults))]
		injected := time.Now()
		detail, err := f.Inject(ctx, h, rng)
		if err != nil {
			// A fault that could not be injected is the harness's failure, not the system's.
			h.T.Errorf("fault %d (%s): %v", n, f.Kind, err)
			return recoveries
		}
		took, ok := h.recover(ctx, f, canary, fmt.Sprintf("fault-%d", n))
		state := fmt.Sprintf("recovered in %.1fs", took.Seconds())
		if !ok {
			state = fmt.Sprintf("NOT recovered within %v", recoveryTimeout)
		}
		h.Logf("fault %d: %s (%s, %.1fs), %s", n, f.Kind, detail, time.Since(injected).Seconds()-took.Seconds(), state)
		recoveries[f.Kind] = append(recoveries[f.Kind], took)
	}
	return recoveries
}

// overlapping are faults made of two of faults at once, as the world makes them: a
// leader killed while kube-apiserver restarts (the new leader starts against a server that
// is not there), and any two kinds of fault injected within a second of each other.
func overlapping(faults []Fault) []Fault {
	var killLeader, restartAPIServer *Fault
	for i := range faults {
		switch faults[i].Kind {
		case "kill -9 leader":
			killLeader = &faults[i]
		case "kube-apiserver restart":
			restartAPIServer = &faults[i]
		}
	}
	var out []Fault
	if killLeader != nil && restartAPIServer != nil {
		out = append(out, both("overlap: kill -9 leader during kube-apiserver restart", func(*rand.Rand) (Fault, Fault) {
			return *restartAPIServer, *killLeader
		}))
	}
	return append(out, both("overlap: two faults within a second", func(rng *rand.Rand) (Fault, Fault) {
		first := faults[rng.IntN(len(faults))]
		for {
			if second := faults[rng.IntN(len(faults))]; second.Kind != first.Kind {
				return first, second
			}
		}
	}))
}

// both is a fault that injects the two faults pick chooses, the second 0-1 s after the
// first while the first lasts, and has recovered once each of them has.
func both(kind string, pick func(rng *rand.Rand) (Fault, Fault)) Fault {
	var chosen []Fault
	return Fault{
		Kind: kind,
		Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			first, second := pick(rng)
			chosen = []Fault{first, second}
			gap := time.Duration(rng.IntN(1000)) * time.Millisecond
			// Each part draws from its own generator, made from the run's in order: the
			// run stays a function of the seed although the parts run at once.
			rngs := []*rand.Rand{rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
			details, errs := make([]string, 2), make([]error, 2)
			var wg sync.WaitGroup
			for i, f := range chosen {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 1 {
						sleep(ctx, gap)
					}
					details[i], errs[i] = f.Inject(ctx, h, rngs[i])
				}()
			}
			wg.Wait()
			return fmt.Sprintf("%s (%s), %.1fs later %s (%s)", first.Kind, details[0], gap.Seconds(), second.Kind, details[1]), errors.Join(errs...)
		},
		parts: func() []Fault { return chosen },
	}
}

// recover waits for the fault's own recovery check, or for the canary to be reconciled
// again; it returns how long it took from the end of the injection. A fault made of
// others has recovered once each of them has.
func (h *Harness) recover(ctx context.Context, f Fault, canary *canary, token string) (time.Duration, bool) {
	start := time.Now()
	if f.parts != nil {
		for i, part := range f.parts() {
			if _, ok := h.recover(ctx, part, canary, fmt.Sprintf("%s-%d", token, i)); !ok {
				return time.Since(start), false
			}
		}
		return time.Since(start), true
	}
	if f.Recovered == nil {
		ok := canary.reconciled(ctx, token, recoveryTimeout)
		return time.Since(start), ok
	}
	for time.Since(start) < recoveryTimeout {
		if f.Recovered(ctx, h) {
			return time.Since(start), true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return time.Since(start), false
}

// printRecoveries prints, per kind of fault, how often it was injected and how long the
// recovery took (median and worst).
func (h *Harness) printRecoveries(recoveries map[string][]time.Duration, faults []Fault) {
	h.Logf("recovery per kind of fault (from the end of the injection):")
	width := 0
	for _, f := range faults {
		width = max(width, len(f.Kind))
	}
	for _, f := range faults {
		ds := recoveries[f.Kind]
		if len(ds) == 0 {
			h.Logf("  %-*s  not injected", width, f.Kind)
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		h.Logf("  %-*s  %3d×  median %5.1fs  max %5.1fs", width, f.Kind, len(ds), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
	}
}
