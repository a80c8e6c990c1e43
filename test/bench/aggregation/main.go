// Command aggregation is `make bench-aggregation`: 2,000 ClusterRoles and 100 aggregators
// with 1–3 selectors, then 1,000 churn events (label flips, rule edits, deletes, creates,
// selector changes), fed to kube-controller-manager v1.37.1 and to trustplane in the same
// run, each with its own real API server. For each it prints the time from the last event
// to converged, the API writes and the CPU seconds of the controller process during the
// churn, and whether the results are identical.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/aggregation"
)

var (
	roles       = flag.Int("roles", 2000, "ClusterRoles to start with (sources).")
	aggregators = flag.Int("aggregators", 100, "Aggregating ClusterRoles.")
	churn       = flag.Int("churn", 1000, "Churn events.")
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
	side                  *aggregation.Side
	cpuBefore, cpuAfter   float64
	writesBefore, writes  int
	lastEvent, convergeAt time.Time
	changes               *ruleChanges
}

func run() error {
	ctx := context.Background()
	root := testenv.RepoRoot()
	dir, err := os.MkdirTemp("", "bench-aggregation")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, "trustplane")
	if out, err := exec.Command("go", "build", "-o", binary, filepath.Join(root, "cmd/trustplane")).CombinedOutput(); err != nil {
		return fmt.Errorf("building trustplane: %w\n%s", err, out)
	}
	kcm, err := aggregation.StartSide("kube-controller-manager", dir, aggregation.KubeControllerManager(filepath.Join(root, "bin/k8s")))
	if err != nil {
		return err
	}
	defer kcm.Stop()
	tp, err := aggregation.StartSide("trustplane", dir, aggregation.Trustplane(binary))
	if err != nil {
		return err
	}
	defer tp.Stop()
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() { <-interrupted; kcm.Stop(); tp.Stop(); os.Exit(130) }()

	sides := []*measured{{side: kcm}, {side: tp}}
	corpus := aggregation.NewCorpus(*seed, "b-")
	corpus.EmptyTop = true
	fmt.Printf("bench-aggregation: %d ClusterRoles + %d aggregators, then %d churn events, seed %d\n", *roles, *aggregators, *churn, *seed)

	if err := feed(ctx, sides, corpus.Initial(*roles, *aggregators)); err != nil {
		return err
	}
	for _, m := range sides {
		if _, err := aggregation.WaitConverged(ctx, m.side.Client, 10*time.Minute); err != nil {
			return fmt.Errorf("%s, initial corpus: %w", m.side.Name, err)
		}
		m.cpuBefore = m.side.CPUSeconds()
		if m.writesBefore, err = controllerWrites(ctx, m.side); err != nil {
			return err
		}
		if m.changes, err = watchRuleChanges(ctx, m.side); err != nil {
			return err
		}
	}

	if err := feed(ctx, sides, corpus.Churn(*churn)); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, m := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.convergeAt, errs[i] = aggregation.WaitConverged(ctx, m.side.Client, 10*time.Minute)
		}()
	}
	wg.Wait()
	for i, m := range sides {
		if errs[i] != nil {
			return fmt.Errorf("%s: %w", m.side.Name, errs[i])
		}
		// Let anything still in flight finish before reading the counters.
		time.Sleep(time.Second)
		m.cpuAfter = m.side.CPUSeconds()
		after, err := controllerWrites(ctx, m.side)
		if err != nil {
			return err
		}
		m.writes = after - m.writesBefore
	}
	want, err := aggregation.Snapshot(ctx, kcm.Client)
	if err != nil {
		return err
	}
	got, err := aggregation.Snapshot(ctx, tp.Client)
	if err != nil {
		return err
	}
	diff := aggregation.Diff(want, got)

	for _, m := range sides {
		fmt.Printf("%-24s converged %6.0f ms after the last event, %5d API writes, %6.2f CPU s during churn\n",
			m.side.Name+":", m.convergeAt.Sub(m.lastEvent).Seconds()*1000, m.writes, m.cpuAfter-m.cpuBefore)
	}
	for _, m := range sides {
		levels, changed := m.changes.byLevel()
		fmt.Printf("%-24s %5d writes changed rules (%s), %d changed nothing\n", m.side.Name+":", changed, formatLevels(levels), m.writes-changed)
	}
	ratio := (sides[0].cpuAfter - sides[0].cpuBefore) / (sides[1].cpuAfter - sides[1].cpuBefore)
	fmt.Printf("results identical: %v (%d ClusterRoles compared, %d differ); CPU ratio kube-controller-manager/trustplane %.1fx (target ≥ 10x); writes %d vs %d (target: no more)\n",
		len(diff) == 0, len(want), len(diff), ratio, sides[0].writes, sides[1].writes)
	if len(diff) > 0 {
		return fmt.Errorf("results differ:\n%s", strings.Join(diff[:min(5, len(diff))], "\n"))
	}
	return nil
}

// feed applies the same ops, in the same order, to every side concurrently.
func feed(ctx context.Context, sides []*measured, ops []aggregation.Op) error {
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, m := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, op := range ops {
				if err := aggregation.Apply(ctx, m.side.Client, op); err != nil {
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

// controllerWrites counts server-side applies and updates of ClusterRoles, as the API
// server itself reports them; the bench only creates, merge-patches and deletes.
func controllerWrites(ctx context.Context, s *aggregation.Side) (int, error) {
	return testenv.APIRequests(ctx, s.Env.Config, func(labels string) bool {
		return strings.Contains(labels, `resource="clusterroles"`) && (strings.Contains(labels, `verb="APPLY"`) || strings.Contains(labels, `verb="PUT"`))
	})
}
