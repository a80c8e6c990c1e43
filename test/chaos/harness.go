// Package chaos is trustplane's robustness suite: the real control plane, two `trustplane
// manager` replicas with leader election as shipped, and the agents, driven by a workload
// on all five systems while faults are injected at random times from a seed, with the
// systems' invariants checked all along and once everything has settled. See
// docs/operations.md, "Failures and recovery", for what it found and what it measures.
package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"

	"github.com/trustplane/trustplane/internal/testenv"
)

// ManagerNamespace is where config/default installs the manager.
const ManagerNamespace = "trustplane-system"

// Harness is what the systems see of a chaos run.
type Harness struct {
	// T is the test; goroutines must not call its Fatal.
	T testing.TB
	// Env is the real test control plane; Env.Client is a cluster admin's.
	Env *testenv.Env
	// Client is Env.Client.
	Client client.Client
	// Bin is the trustplane binary built from ./cmd/trustplane.
	Bin string
	// Seed is this run's seed.
	Seed uint64
	// SettleTimeout is the stated time within which everything is Ready again once
	// the faults have stopped (docs/operations.md).
	SettleTimeout time.Duration
	// LogDir, when set (CHAOS_LOGS), keeps every process's output as <name>.log at the
	// end of the run: a violation's cause is often in the manager's log.
	LogDir string

	cp       *controlPlane
	managers []*Proc
	// nets are the manager replicas' network namespaces (netns.go), by replica; nil
	// where the machine cannot make them.
	nets []*replicaNet
	// proxySources maps a replica's address to the loopback address proxies dial from
	// for it (Proxy); set once the replicas' namespaces are made.
	proxySources atomic.Pointer[map[string]*net.TCPAddr]
	jwks         []string
	// standalone are the JWKS servers of their own a system started (AddJWKSServer).
	standalone []JWKSServer
	procs      []*Proc
	procsMu    sync.Mutex

	checks     atomic.Int64
	violations atomic.Int64
	// notJudged counts the checks that could not be judged, by invariant.
	notJudged   atomic.Int64
	notJudgedMu sync.Mutex
	notJudgedBy map[string]int64
	// violated keeps the first violations in full for the end of the run.
	violatedMu sync.Mutex
	violated   []string
	settleBy   atomic.Pointer[time.Time]
	start      time.Time
}

// maxViolationsKept bounds what the end of the run repeats; every violation is printed
// when it is found.
const maxViolationsKept = 50

// Check records one invariant check; a false ok is a violation, printed with the detail.
func (h *Harness) Check(invariant string, ok bool, format string, args ...any) {
	h.checks.Add(1)
	if ok {
		return
	}
	h.violations.Add(1)
	line := fmt.Sprintf("VIOLATION %s: %s", invariant, fmt.Sprintf(format, args...))
	h.Logf("%s", line)
	h.violatedMu.Lock()
	if len(h.violated) < maxViolationsKept {
		h.violated = append(h.violated, line)
	}
	h.violatedMu.Unlock()
}

// maxNotJudgedLogged bounds how many not-judged checks of one invariant are printed one
// by one; all are counted, and the end of the run prints the count per invariant.
const maxNotJudgedLogged = 20

// NotJudged records one check of invariant that could not be judged (a read failed, a
// revision was compacted, a watch missed events, an endpoint did not answer): it is no
// violation, but it is counted, and too many fail the run (maxNotJudgedShare).
func (h *Harness) NotJudged(invariant, format string, args ...any) {
	h.NotJudgedN(1, invariant, format, args...)
}

// NotJudgedN records n checks of invariant that could not be judged, for one reason.
func (h *Harness) NotJudgedN(n int64, invariant, format string, args ...any) {
	h.notJudged.Add(n)
	h.notJudgedMu.Lock()
	if h.notJudgedBy == nil {
		h.notJudgedBy = map[string]int64{}
	}
	logged := h.notJudgedBy[invariant] < maxNotJudgedLogged
	h.notJudgedBy[invariant] += n
	h.notJudgedMu.Unlock()
	if logged {
		h.Logf("not judged (%d) %s: %s", n, invariant, fmt.Sprintf(format, args...))
	}
}

// Eventually polls cond until it holds or the settle deadline passes, and records one
// check of invariant: a violation when cond never held. Outside Settle the deadline is
// SettleTimeout from now.
func (h *Harness) Eventually(ctx context.Context, invariant string, cond func(ctx context.Context) bool) bool {
	deadline := time.Now().Add(h.SettleTimeout)
	if by := h.settleBy.Load(); by != nil {
		deadline = *by
	}
	for {
		if cond(ctx) {
			h.Check(invariant, true, "")
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.Check(invariant, false, "did not hold within %v of the faults' end", h.SettleTimeout)
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Logf prints a line of the run, stamped with the time since it started, at once (not
// only when the test fails): a long run shows where it is.
func (h *Harness) Logf(format string, args ...any) {
	fmt.Printf("chaos %7.1fs %s\n", time.Since(h.start).Seconds(), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

// JWKSServer is one endpoint that serves the JWK Sets: a manager replica's built-in
// server, or a `trustplane jwks-server` of its own; Proc is the process behind it.
type JWKSServer struct {
	Addr string
	Proc *Proc
}

// JWKSServers are every endpoint that serves the JWK Sets: the manager replicas' built-in
// servers, then the standalone ones (AddJWKSServer).
func (h *Harness) JWKSServers() []JWKSServer {
	servers := make([]JWKSServer, 0, len(h.jwks)+len(h.standalone))
	for i, addr := range h.jwks {
		servers = append(servers, JWKSServer{Addr: addr, Proc: h.managers[i]})
	}
	return append(servers, h.standalone...)
}

// AddJWKSServer adds a standalone JWKS server to JWKSServers; a system's Setup calls it,
// before anything reads JWKSServers.
func (h *Harness) AddJWKSServer(s JWKSServer) { h.standalone = append(h.standalone, s) }

// APIServerHost is the kube-apiserver's host:port.
func (h *Harness) APIServerHost() string { return h.cp.hostPort }

// Run runs `trustplane args...` as a supervised process named name.
func (h *Harness) Run(name string, args ...string) *Proc {
	p := startProc(h, name, h.Bin, args)
	h.procsMu.Lock()
	h.procs = append(h.procs, p)
	h.procsMu.Unlock()
	return p
}

// stopProcs stops every supervised process, the last started first, and keeps what each
// printed in LogDir when there is one.
func (h *Harness) stopProcs() {
	h.procsMu.Lock()
	procs := append([]*Proc(nil), h.procs...)
	h.procsMu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
	if h.LogDir == "" {
		return
	}
	for _, p := range procs {
		path := filepath.Join(h.LogDir, p.Name()+".log")
		if err := os.WriteFile(path, []byte(p.Output()), 0o644); err != nil {
			h.Logf("keeping the output of %s: %v", p.Name(), err)
		}
	}
	h.Logf("the processes' outputs are in %s", h.LogDir)
}

// httpGet fetches url (within 5s), reporting whether it answered 200.
func httpGet(ctx context.Context, url string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err == nil && resp.StatusCode == http.StatusOK
}

// changeCanary tells a fault's recovery by one change of a canary object made after the
// fault: Recovered changes the object once (change) and then says whether its Ready
// condition is True for that generation or a later one.
type changeCanary struct {
	generation atomic.Int64 // of the change; 0: not made yet
}

// reset forgets the last change: the next recovered makes a new one.
func (c *changeCanary) reset() { c.generation.Store(0) }

// recovered reads obj at key, changes it once with change (after a reset), and reports
// whether conditions(obj) says Ready for the change.
func (c *changeCanary) recovered(ctx context.Context, h *Harness, key client.ObjectKey, obj client.Object, change func(), conditionsOf func() []metav1.Condition) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.Client.Get(ctx, key, obj); err != nil {
		return false
	}
	if c.generation.Load() == 0 {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		change()
		if err := h.Client.Patch(ctx, obj, patch); err != nil {
			return false
		}
		c.generation.Store(obj.GetGeneration())
		return false
	}
	ready := meta.FindStatusCondition(conditionsOf(), conditions.Ready)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration >= c.generation.Load()
}
