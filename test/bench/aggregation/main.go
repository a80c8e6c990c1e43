//go:build bench

// Command aggregation is `make bench-aggregation`: 2,000 ClusterRoles and 100 aggregators
// with 1–3 selectors, then 1,000 churn events (label flips, rule edits, deletes, creates,
// selector changes), fed to kube-controller-manager v1.37.1 and to trustplane in the same
// run, each with its own real API server; then the same with 20,000 ClusterRoles. For
// each side it prints the time from the last event to converged, the API writes and the
// CPU seconds of the controller process during the churn, and whether the results are
// identical; for trustplane, the initial corpus's time, CPU and peak-RSS growth per
// ClusterRole at each size and their 10x/1x growth.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/aggregation/sidebyside"
)

var (
	roles       = flag.Int("roles", 2000, "ClusterRoles to start with (sources) at 1x.")
	growth      = flag.Int("growth", testenv.BenchGrowth(10), "The larger size has this many times -roles (1: only 1x; $"+testenv.BenchScalesEnv+"=1 makes 1 the default).")
	aggregators = flag.Int("aggregators", 100, "Aggregating ClusterRoles (the same at every size).")
	churn       = flag.Int("churn", 1000, "Churn events (the same at every size).")
	seed        = flag.Int64("seed", 42, "Corpus seed.")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-aggregation:", err)
		os.Exit(1)
	}
}

type measured struct {
	side                  *sidebyside.Side
	cpuBefore, cpuAfter   float64
	writesBefore, writes  int
	lastEvent, convergeAt time.Time
	changes               *ruleChanges
}

// sizeResult is one size's figures.
type sizeResult struct {
	roles, objects int // sources; every ClusterRole the corpus created
	// trustplane's initial load: from the first create to converged, its CPU and the
	// growth of its peak RSS.
	loadTime    time.Duration
	loadCPU     float64
	loadRSS     int64
	kcmLoadCPU  float64
	churnCPU    [2]float64 // kube-controller-manager, trustplane
	churnWrites [2]int
	// noopWrites are trustplane's writes that changed no rules; forced is the rule
	// changes the churn forces taken one event at a time (sidebyside.Replay).
	noopWrites int
	forced     int
	compared   int
	differ     []string
}

func run() error {
	ctrllog.SetLogger(logr.Discard()) // envtest's own info lines
	root := testenv.RepoRoot()
	dir, err := os.MkdirTemp("", "bench-aggregation")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	binary, err := testenv.BenchBinary(dir)
	if err != nil {
		return err
	}
	sizes := []int{*roles}
	if *growth > 1 {
		sizes = append(sizes, *roles**growth)
	}
	var results []sizeResult
	for _, n := range sizes {
		r, err := runSize(context.Background(), root, dir, binary, n)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if err := testenv.RecordBench(rows(results)...); err != nil {
		return err
	}
	for _, r := range results {
		if len(r.differ) > 0 {
			return fmt.Errorf("%d ClusterRoles: results differ:\n%s", r.roles, strings.Join(r.differ[:min(5, len(r.differ))], "\n"))
		}
	}
	return nil
}

// runSize feeds both sides, each with a fresh API server, the corpus of n sources and
// then the churn.
func runSize(ctx context.Context, root, dir, binary string, n int) (sizeResult, error) {
	res := sizeResult{roles: n}
	kcm, err := sidebyside.StartSide("kube-controller-manager", dir, sidebyside.KubeControllerManager(filepath.Join(root, "bin/k8s")))
	if err != nil {
		return res, err
	}
	defer kcm.Stop()
	tp, err := sidebyside.StartSide("trustplane", dir, sidebyside.Trustplane(binary))
	if err != nil {
		return res, err
	}
	defer tp.Stop()
	interrupted := make(chan os.Signal, 1)
	defer close(interrupted)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupted)
	go func() {
		if _, ok := <-interrupted; ok {
			kcm.Stop()
			tp.Stop()
			os.Exit(130)
		}
	}()

	sides := []*measured{{side: kcm}, {side: tp}}
	corpus := sidebyside.NewCorpus(*seed, "b-")
	corpus.EmptyTop = true
	initial := corpus.Initial(n, *aggregators)
	res.objects = len(initial)
	fmt.Printf("bench-aggregation: %d ClusterRoles + %d aggregators, then %d churn events, seed %d\n", n, res.objects-n, *churn, *seed)

	// Both controllers up and done with the API server's bootstrap roles: the baseline.
	for _, m := range sides {
		if _, err := waitConverged(ctx, m.side, 2*time.Minute); err != nil {
			return res, fmt.Errorf("%s, bootstrap roles: %w", m.side.Name, err)
		}
	}
	time.Sleep(time.Second)
	kcmCPU0, cpu0, rss0 := kcm.CPUSeconds(), tp.CPUSeconds(), testenv.PeakRSS(tp.PID())
	start := time.Now()
	if err := feed(ctx, sides, initial); err != nil {
		return res, err
	}
	for _, m := range []*measured{sides[1], sides[0]} { // trustplane's time is the figure
		at, err := waitConverged(ctx, m.side, 15*time.Minute)
		if err != nil {
			return res, fmt.Errorf("%s, initial corpus: %w", m.side.Name, err)
		}
		if m.side == tp {
			res.loadTime = at.Sub(start)
		}
	}
	time.Sleep(time.Second) // anything still in flight
	res.loadCPU, res.loadRSS, res.kcmLoadCPU = tp.CPUSeconds()-cpu0, testenv.PeakRSS(tp.PID())-rss0, kcm.CPUSeconds()-kcmCPU0
	fmt.Printf("initial corpus of %d ClusterRoles: trustplane converged %v after the first create, %.2f CPU s (kube-controller-manager %.2f), peak RSS +%.1f MiB\n",
		res.objects, res.loadTime.Round(time.Millisecond), res.loadCPU, res.kcmLoadCPU, float64(res.loadRSS)/(1<<20))

	beforeChurn, err := listClusterRoles(ctx, tp)
	if err != nil {
		return res, err
	}
	for _, m := range sides {
		m.cpuBefore = m.side.CPUSeconds()
		if m.writesBefore, err = controllerWrites(ctx, m.side); err != nil {
			return res, err
		}
		if m.changes, err = watchRuleChanges(ctx, m.side); err != nil {
			return res, err
		}
	}
	churnOps := corpus.Churn(*churn)
	if err := feed(ctx, sides, churnOps); err != nil {
		return res, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, m := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.convergeAt, errs[i] = waitConverged(ctx, m.side, 15*time.Minute)
		}()
	}
	wg.Wait()
	for i, m := range sides {
		if errs[i] != nil {
			return res, fmt.Errorf("%s: %w", m.side.Name, errs[i])
		}
		// Let anything still in flight finish before reading the counters.
		time.Sleep(time.Second)
		m.cpuAfter = m.side.CPUSeconds()
		after, err := controllerWrites(ctx, m.side)
		if err != nil {
			return res, err
		}
		m.writes = after - m.writesBefore
		res.churnCPU[i], res.churnWrites[i] = m.cpuAfter-m.cpuBefore, m.writes
	}
	want, err := sidebyside.Snapshot(ctx, kcm.Client)
	if err != nil {
		return res, err
	}
	got, err := sidebyside.Snapshot(ctx, tp.Client)
	if err != nil {
		return res, err
	}
	res.compared, res.differ = len(want), sidebyside.Diff(want, got)

	for _, m := range sides {
		fmt.Printf("%-24s converged %6.0f ms after the last event, %5d API writes, %6.2f CPU s during churn\n",
			m.side.Name+":", m.convergeAt.Sub(m.lastEvent).Seconds()*1000, m.writes, m.cpuAfter-m.cpuBefore)
	}
	for _, m := range sides {
		levels, changed := m.changes.byLevel()
		fmt.Printf("%-24s %5d writes changed rules (%s), %d changed nothing\n", m.side.Name+":", changed, formatLevels(levels), m.writes-changed)
		if m.side == tp {
			res.noopWrites = m.writes - changed
		}
	}
	replay := sidebyside.NewReplay(beforeChurn)
	for _, op := range churnOps {
		n, err := replay.Apply(op)
		if err != nil {
			return res, err
		}
		res.forced += n
	}
	fmt.Printf("results identical: %v (%d ClusterRoles compared, %d differ); CPU ratio kube-controller-manager/trustplane %.1fx (target ≥ 10x); writes %d vs %d, the churn forces %d one event at a time (target: no more, none changing nothing)\n",
		len(res.differ) == 0, res.compared, len(res.differ), res.churnCPU[0]/res.churnCPU[1], res.churnWrites[0], res.churnWrites[1], res.forced)
	return res, nil
}

// waitConverged is sidebyside.WaitConverged, but pauses twice as long as a check took:
// a check lists and aggregates every ClusterRole, and back-to-back checks of 20,000 would
// take the CPU the controllers are being measured on.
func waitConverged(ctx context.Context, s *sidebyside.Side, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		start := time.Now()
		pending, err := sidebyside.Unconverged(ctx, s.Client)
		if err == nil && len(pending) == 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not converged after %v: %d aggregators pending, last error %w", timeout, len(pending), err)
		}
		time.Sleep(max(25*time.Millisecond, 2*time.Since(start)))
	}
}

// rows are each size's churn against kube-controller-manager (the peer), the initial
// load's cost per ClusterRole, and its 10x/1x growth.
func rows(results []sizeResult) []testenv.BenchRow {
	var out []testenv.BenchRow
	for _, r := range results {
		churnWork := fmt.Sprintf("%s churn events among %s ClusterRoles", thousands(*churn), thousands(r.objects))
		cpuRatio := r.churnCPU[0] / r.churnCPU[1]
		writesRatio := float64(r.churnWrites[0]) / float64(r.churnWrites[1])
		loadWork := fmt.Sprintf("create and aggregate %s ClusterRoles", thousands(r.objects))
		out = append(out,
			testenv.BenchRow{System: "aggregation", Work: churnWork, Size: r.roles, Figure: "CPU", Value: r.churnCPU[1], Unit: "s",
				Peer: testenv.Ptr(r.churnCPU[0]), Ratio: testenv.Ptr(cpuRatio), Target: "peer/ours >= 10", Pass: cpuRatio >= 10},
			testenv.BenchRow{System: "aggregation", Work: churnWork, Size: r.roles, Figure: "API writes", Value: float64(r.churnWrites[1]),
				Peer: testenv.Ptr(float64(r.churnWrites[0])), Ratio: testenv.Ptr(writesRatio),
				Target: fmt.Sprintf("<= %d (the rule changes the events force one at a time), none changing nothing", r.forced),
				Pass:   r.churnWrites[1] <= r.forced && r.noopWrites == 0},
			testenv.BenchRow{System: "aggregation", Work: churnWork, Size: r.roles, Figure: "ClusterRoles differing from peer", Value: float64(len(r.differ)),
				Target: "0 of " + thousands(r.compared), Pass: len(r.differ) == 0},
			testenv.BenchRow{System: "aggregation", Work: loadWork, Size: r.roles, Figure: "time per ClusterRole", Value: r.loadTime.Seconds() * 1e3 / float64(r.objects), Unit: "ms"},
			testenv.BenchRow{System: "aggregation", Work: loadWork, Size: r.roles, Figure: "CPU per ClusterRole", Value: r.loadCPU * 1e6 / float64(r.objects), Unit: "µs",
				Peer: testenv.Ptr(r.kcmLoadCPU * 1e6 / float64(r.objects)), Ratio: testenv.Ptr(r.kcmLoadCPU / r.loadCPU)},
			testenv.BenchRow{System: "aggregation", Work: loadWork, Size: r.roles, Figure: "peak RSS growth per ClusterRole", Value: float64(r.loadRSS) / float64(r.objects), Unit: "B"})
	}
	if len(results) < 2 {
		return out
	}
	one, ten := results[0], results[len(results)-1]
	work := fmt.Sprintf("create and aggregate %s → %s ClusterRoles", thousands(one.objects), thousands(ten.objects))
	per := func(v float64, r sizeResult) float64 { return v / float64(r.objects) }
	for _, g := range []struct {
		figure   string
		one, ten float64
	}{
		{"time per ClusterRole", per(one.loadTime.Seconds(), one), per(ten.loadTime.Seconds(), ten)},
		{"CPU per ClusterRole", per(one.loadCPU, one), per(ten.loadCPU, ten)},
		{"peak RSS growth per ClusterRole", per(float64(one.loadRSS), one), per(float64(ten.loadRSS), ten)},
	} {
		ratio := g.ten / g.one
		out = append(out, testenv.BenchRow{System: "aggregation", Work: work, Size: ten.roles, Figure: g.figure + " 10x/1x", Value: ratio,
			Ratio: testenv.Ptr(ratio), Target: fmt.Sprintf("ratio <= %.1f", testenv.MaxGrowth), Pass: ratio <= testenv.MaxGrowth})
	}
	return out
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// feed applies the same ops, in the same order, to every side concurrently.
func feed(ctx context.Context, sides []*measured, ops []sidebyside.Op) error {
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, m := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, op := range ops {
				if err := sidebyside.Apply(ctx, m.side.Client, op); err != nil {
					errs[i] = fmt.Errorf("%s: %s: %w", m.side.Name, op.Name, err)
					return
				}
			}
			m.lastEvent = time.Now()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func listClusterRoles(ctx context.Context, s *sidebyside.Side) ([]rbacv1.ClusterRole, error) {
	list := &rbacv1.ClusterRoleList{}
	if err := s.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %s's ClusterRoles: %w", s.Name, err)
	}
	return list.Items, nil
}

// controllerWrites counts server-side applies and updates of ClusterRoles, as the API
// server itself reports them; the bench only creates, merge-patches and deletes.
func controllerWrites(ctx context.Context, s *sidebyside.Side) (int, error) {
	return testenv.APIRequests(ctx, s.Env.Config, func(labels string) bool {
		return strings.Contains(labels, `resource="clusterroles"`) && (strings.Contains(labels, `verb="APPLY"`) || strings.Contains(labels, `verb="PUT"`))
	})
}
