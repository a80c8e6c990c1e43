package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trustplane/trustplane/internal/testenv"
)

// Config is what a run is made of; CHAOS_SEED, CHAOS_FAULTS, CHAOS_DURATION,
// CHAOS_SYSTEMS and CHAOS_LOGS set it (see Makefile, make chaos).
type Config struct {
	// Seed drives the choice and timing of faults and each system's workload.
	Seed uint64
	// Faults ends the fault phase after this many faults (0: only Duration does).
	Faults int
	// Duration ends the fault phase after this long.
	Duration time.Duration
	// Systems restricts the run to the systems named (empty: all).
	Systems []string
	// SettleTimeout is the stated time for everything to be Ready after the faults.
	SettleTimeout time.Duration
	// LogDir keeps every process's output (CHAOS_LOGS; empty: not kept).
	LogDir string
	// FaultKinds restricts the faults to the kinds containing one of these (empty: all),
	// to replay one kind of fault many times (CHAOS_FAULT_KINDS).
	FaultKinds []string
}

// Result is what a run printed last.
type Result struct {
	Seed       uint64
	Faults     int
	Checks     int64
	Violations int64
	// NotJudged counts the checks that could not be judged (Harness.NotJudged).
	NotJudged int64
}

// String is the run's last line.
func (r Result) String() string {
	return fmt.Sprintf("chaos: seed %d, faults %d, invariant checks %d, violations %d, not judged %d", r.Seed, r.Faults, r.Checks, r.Violations, r.NotJudged)
}

// TooLittleJudged says whether more than maxNotJudgedShare of the checks could not be
// judged: such a run fails, whatever its violations.
func (r Result) TooLittleJudged() bool { return notJudgedOverLimit(r.Checks, r.NotJudged) }

// Run runs the chaos suite against env with the systems given.
func Run(t *testing.T, env *testenv.Env, cfg Config, systems []System) Result {
	h := &Harness{T: t, Env: env, Client: env.Client, Bin: testenv.Binary(t), Seed: cfg.Seed, SettleTimeout: cfg.SettleTimeout, LogDir: cfg.LogDir, start: time.Now()}
	cp, err := newControlPlane(env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.cp = cp
	t.Cleanup(cp.stop) // before envtest stops etcd: cleanups run last-in first-out
	kinds := ""
	if len(cfg.FaultKinds) > 0 {
		kinds = " CHAOS_FAULT_KINDS=" + strings.Join(cfg.FaultKinds, ",")
	}
	h.Logf("seed %d (replay: CHAOS_SEED=%d CHAOS_FAULTS=%d CHAOS_DURATION=%v CHAOS_SYSTEMS=%s%s make chaos)",
		cfg.Seed, cfg.Seed, cfg.Faults, cfg.Duration, strings.Join(systemNames(systems), ","), kinds)

	ctx := context.Background()
	manager := testenv.Rendered(t, "config/default")
	env.Install(t, manager)
	env.Install(t, testenv.Rendered(t, "config/node-agent"))
	canary := newCanary(h)
	if err := canary.setup(ctx); err != nil {
		t.Fatalf("canary: %v", err)
	}
	for _, s := range systems {
		if err := s.Setup(ctx, h); err != nil {
			t.Fatalf("setting up %s: %v", s.Name(), err)
		}
	}
	h.startManagers(t, manager, systems)
	t.Cleanup(h.stopProcs)
	if !canary.reconciled(ctx, "start", 2*time.Minute) {
		t.Fatalf("the manager never reconciled the canary; outputs:\n%s", h.managerOutputs())
	}

	faults := append(h.faults(), systemFaults(h, systems)...)
	faults = selectFaults(append(faults, overlapping(faults)...), cfg.FaultKinds)
	if len(faults) == 0 {
		t.Fatalf("no fault kind contains one of %q", cfg.FaultKinds)
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var work sync.WaitGroup
	var stepErrors atomic.Int64
	for _, s := range systems {
		rng := rand.New(rand.NewPCG(cfg.Seed, nameHash(s.Name())))
		work.Add(2)
		go func() {
			defer work.Done()
			for workCtx.Err() == nil {
				if err := s.Step(workCtx, h, rng); err != nil {
					stepErrors.Add(1)
				}
				sleep(workCtx, time.Duration(100+rng.IntN(500))*time.Millisecond)
			}
		}()
		go func() {
			defer work.Done()
			for workCtx.Err() == nil {
				s.Check(workCtx, h)
				sleep(workCtx, 300*time.Millisecond)
			}
		}()
	}

	recoveries := h.injectFaults(ctx, cfg, faults, canary)
	stopWork()
	work.Wait()
	injected := 0
	for _, r := range recoveries {
		injected += len(r)
	}
	h.Logf("faults over: %d injected; %d workload steps failed on the way (expected while a fault lasts)", injected, stepErrors.Load())

	h.settle(ctx, systems, canary)
	h.printRecoveries(recoveries, faults)
	h.printNotJudged()
	h.violatedMu.Lock()
	for _, v := range h.violated {
		t.Error(v)
	}
	h.violatedMu.Unlock()
	return Result{Seed: cfg.Seed, Faults: injected, Checks: h.checks.Load(), Violations: h.violations.Load(), NotJudged: h.notJudged.Load()}
}

// printNotJudged prints how many checks of each invariant could not be judged.
func (h *Harness) printNotJudged() {
	h.notJudgedMu.Lock()
	defer h.notJudgedMu.Unlock()
	h.Logf("checks not judged: %d (at most %.0f%% of the checks may be)", h.notJudged.Load(), maxNotJudgedShare*100)
	for _, invariant := range slices.Sorted(maps.Keys(h.notJudgedBy)) {
		h.Logf("  %-60s %6d", invariant, h.notJudgedBy[invariant])
	}
}

// startManagers runs two manager replicas as config/manager's Deployment runs them, under
// its ServiceAccount's token, each with its own ports.
func (h *Harness) startManagers(t *testing.T, manager []*unstructured.Unstructured, systems []System) {
	deployment := testenv.PodSpecOf(t, manager, "Deployment", "trustplane-manager")
	container := testenv.ContainerOf(t, deployment, "manager")
	kubeconfig := h.Env.ServiceAccountKubeconfig(t, ManagerNamespace, "trustplane-manager")
	var extra []string
	for _, s := range systems {
		if m, ok := s.(ManagerArgs); ok {
			extra = append(extra, m.ManagerArgs(h)...)
		}
	}
	replicas := replicasOf(t, manager, "trustplane-manager")
	h.nets = h.replicaNets(t, replicas)
	for i := range replicas {
		probes, metrics, jwks := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
		if n := h.nets[i]; n != nil {
			// Inside its namespace the replica listens on its own address, where the
			// harness reaches it.
			probes, metrics, jwks = n.On(probes), n.On(metrics), n.On(jwks)
		}
		args := testenv.ArgsOf(t, container, nil, append([]string{
			"--kubeconfig=" + kubeconfig,
			// A pod reads these from its token mount; a process is told.
			"--leader-election-namespace=" + ManagerNamespace, "--podcertificate-signer-ca-namespace=" + ManagerNamespace,
			"--secret-checksum-publish-namespace=" + ManagerNamespace, "--secret-checksum-scopes=cluster,namespace",
			"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probes, "--jwks-server-bind-address=" + jwks,
		}, extra...)...)
		h.managers = append(h.managers, h.runIn(h.nets[i], fmt.Sprintf("manager-%d", i), args...))
		h.jwks = append(h.jwks, jwks)
	}
}

// replicaNets makes a network namespace for each replica, or none when the
// machine cannot (the run then has no partition fault, and says why).
func (h *Harness) replicaNets(t *testing.T, replicas int) []*replicaNet {
	nets := make([]*replicaNet, replicas)
	removeStaleRules()
	for i := range nets {
		rn, err := newReplicaNet(i)
		if err != nil {
			h.Logf("manager replicas run without network namespaces, so without the partition fault: %v", err)
			for _, made := range nets[:i] {
				made.remove()
			}
			return make([]*replicaNet, replicas)
		}
		t.Cleanup(rn.remove)
		nets[i] = rn
	}
	sources := map[string]*net.TCPAddr{}
	for _, rn := range nets {
		sources[rn.replicaIP] = &net.TCPAddr{IP: net.ParseIP(rn.loopback)}
	}
	h.proxySources.Store(&sources)
	return nets
}

// proxySource is the address a proxy dials from for a connection from remote: the
// replica's loopback address, or any (nil) for others.
func (h *Harness) proxySource(remote net.Addr) *net.TCPAddr {
	sources := h.proxySources.Load()
	addr, ok := remote.(*net.TCPAddr)
	if sources == nil || !ok {
		return nil
	}
	return (*sources)[addr.IP.String()]
}

// runIn is Run inside the network namespace n (nil: on the host).
func (h *Harness) runIn(n *replicaNet, name string, args ...string) *Proc {
	if n == nil {
		return h.Run(name, args...)
	}
	path, args := n.Wrap(h.Bin, args)
	p := startProc(h, name, path, args)
	h.procsMu.Lock()
	h.procs = append(h.procs, p)
	h.procsMu.Unlock()
	return p
}

// replicasOf is the Deployment's spec.replicas in the rendered manifests.
func replicasOf(t *testing.T, objs []*unstructured.Unstructured, name string) int {
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			// Decoded YAML holds numbers as float64.
			n, found, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
			f, isNumber := n.(float64)
			if err != nil || !found || !isNumber || f < 2 {
				t.Fatalf("Deployment %s: want spec.replicas of at least 2, found %v", name, n)
			}
			return int(f)
		}
	}
	t.Fatalf("no Deployment %s in the manifests", name)
	return 0
}

func systemNames(systems []System) []string {
	names := make([]string, 0, len(systems))
	for _, s := range systems {
		names = append(names, s.Name())
	}
	return names
}

// selectFaults is the faults whose kind contains one of kinds (all when kinds is empty).
func selectFaults(faults []Fault, kinds []string) []Fault {
	if len(kinds) == 0 {
		return faults
	}
	return slices.DeleteFunc(faults, func(f Fault) bool {
		return !slices.ContainsFunc(kinds, func(k string) bool { return strings.Contains(f.Kind, k) })
	})
}

func systemFaults(h *Harness, systems []System) []Fault {
	var faults []Fault
	for _, s := range systems {
		if f, ok := s.(Faults); ok {
			faults = append(faults, f.Faults(h)...)
		}
	}
	return faults
}

// nameHash gives each system a stream of its own from the seed.
func nameHash(name string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(name))
	return f.Sum64()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// managerOutputs is every manager replica's output, for a failure message.
func (h *Harness) managerOutputs() string {
	var b strings.Builder
	for _, m := range h.managers {
		fmt.Fprintf(&b, "--- %s\n%s\n", m.Name(), m.Output())
	}
	return b.String()
}

// leader is the manager replica that holds the leader Lease: client-go logs its
// acquisition once per process, and a replica that loses the Lease exits.
func (h *Harness) leader() *Proc {
	for _, m := range h.managers {
		if m.Running() && strings.Contains(m.Output(), "Successfully acquired lease") {
			return m
		}
	}
	return nil
}
