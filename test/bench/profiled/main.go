//go:build bench

// Command profiled is the trustplane binary that profiles itself: the same root command
// as cmd/trustplane, with a CPU profile written to $TRUSTPLANE_CPUPROFILE (when set) from
// start to exit, and what it holds at exit to that path with .heap appended. A benchmark run with -cpuprofile builds it in place of cmd/trustplane
// (test/bench/benchprof), so that the process measured is the one profiled.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/cli"
)

// ProfileEnv names the file the profile goes to.
const ProfileEnv = "TRUSTPLANE_CPUPROFILE"

func main() {
	stop, err := startProfile(os.Getenv(ProfileEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: %v\n", err)
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	err = cli.NewRootCommand().ExecuteContext(ctx)
	stop() // before any exit: a profile cut short is unreadable
	if err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: %v\n", err)
		os.Exit(1)
	}
}

// writeHeapProfile writes what the process holds as it exits (its caches, still full) to
// path: go tool pprof -sample_index=inuse_space <file>.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: heap profile: %v\n", err)
		return
	}
	defer func() { _ = f.Close() }()
	runtime.GC() // what is live, not what awaits collection
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: heap profile: %v\n", err)
	}
}

// startProfile starts the CPU profile into path; an empty path profiles nothing.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		writeHeapProfile(path + ".heap")
	}, nil
}
