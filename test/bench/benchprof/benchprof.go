//go:build bench

// Package benchprof lets a benchmark profile the trustplane process it measures: with
// -cpuprofile, the bench's binary is test/bench/profiled (cmd/trustplane's root command
// with a CPU profile) and each process it starts writes its own profile.
package benchprof

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/testenv"
)

// Profiler hands out a profile file to each process a benchmark starts.
type Profiler struct {
	prefix string
	mu     sync.Mutex
	n      int
}

// Build replaces binary with the profiling build and returns a Profiler whose files are
// prefix.1, prefix.2, ... in the order the processes start; an empty prefix builds
// nothing and returns nil.
func Build(binary, prefix string) (*Profiler, error) {
	if prefix == "" {
		return nil, nil
	}
	cmd := exec.Command("go", "build", "-tags", "bench", "-o", binary, "./test/bench/profiled")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the profiling trustplane: %w\n%s", err, out)
	}
	return &Profiler{prefix: prefix}, nil
}

// Env is the environment entry that makes the next process profile itself, and the file
// it writes; nothing on a nil Profiler.
func (p *Profiler) Env() (entry, file string) {
	if p == nil {
		return "", ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	file = p.prefix + "." + strconv.Itoa(p.n)
	return "TRUSTPLANE_CPUPROFILE=" + file, file
}

// APIServer records the API server's own CPU profile (its /debug/pprof/profile, on by
// default) for the given time from now, to file; the error, if any, comes on the
// channel once the profile is written. A bench uses it to see what a run costs the API
// server, whose CPU the run shares with trustplane on this machine.
func APIServer(ctx context.Context, cfg *rest.Config, file string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			done <- err
			return
		}
		raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
		if err != nil {
			done <- fmt.Errorf("profiling the API server: %w", err)
			return
		}
		done <- os.WriteFile(file, raw, 0o644)
	}()
	return done
}
