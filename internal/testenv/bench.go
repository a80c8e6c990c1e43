package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Bench is what every `make bench-*` program that runs the shipped binary starts with: a
// test control plane, a kubeconfig file of its admin, and the trustplane binary built
// from ./cmd/trustplane, in a temporary directory. Ctrl-C stops the control plane too.
type Bench struct {
	Env *Env
	// Dir holds Kubeconfig, Binary and whatever the benchmark writes.
	Dir, Kubeconfig, Binary string
}

// StartBench starts a Bench; name prefixes its temporary directory. Close ends it.
func StartBench(name string) (*Bench, error) {
	env, err := Start()
	if err != nil {
		return nil, err
	}
	// Ctrl-C still stops kube-apiserver and etcd; a manager child dies with its parent.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		_ = env.Stop()
		os.Exit(130)
	}()
	b := &Bench{Env: env}
	if b.Dir, err = os.MkdirTemp("", name); err != nil {
		b.Close()
		return nil, err
	}
	b.Kubeconfig = filepath.Join(b.Dir, "kubeconfig")
	if err := os.WriteFile(b.Kubeconfig, env.Environment().KubeConfig, 0o600); err != nil {
		b.Close()
		return nil, err
	}
	if b.Binary, err = BenchBinary(b.Dir); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// BenchBinary is the trustplane binary a bench measures: $TRUSTPLANE_BENCH_BINARY, which
// make bench builds once so that every bench and run measures the same build, or else
// one built from the tree into dir.
func BenchBinary(dir string) (string, error) {
	if built := os.Getenv("TRUSTPLANE_BENCH_BINARY"); built != "" {
		return built, nil
	}
	binary := filepath.Join(dir, "trustplane")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/trustplane")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building trustplane: %w\n%s", err, out)
	}
	return binary, nil
}

// Close stops the control plane and removes the directory.
func (b *Bench) Close() {
	_ = b.Env.Stop()
	if b.Dir != "" {
		_ = os.RemoveAll(b.Dir)
	}
}

// SyncBuffer is a bytes.Buffer safe for a child process's output and a reader at once.
type SyncBuffer = syncBuffer

// PeakRSS is a process's high-water resident set size (VmHWM), 0 when it cannot be read.
func PeakRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchAddr is a free loopback address for a benchmark's child process, outside the
// ephemeral range and reserved against other test processes (see FreeAddr).
func BenchAddr() string {
	addr, err := reservePort()
	if err != nil {
		panic(err)
	}
	return addr
}

// ResidentSet is a process's resident set size now (VmRSS), 0 when it cannot be read.
func ResidentSet(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ProcessCPU is a process's CPU seconds so far (utime + stime of /proc/<pid>/stat, in
// clock ticks of 1/100 s as on every Linux this runs on), 0 when it cannot be read.
func ProcessCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:]) // fields[0] is field 3, state
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// Parallel runs do(0..n-1) from k goroutines, as a plain client with k workers would
// (a benchmark's floor), and returns the first error.
func Parallel(k, n int, do func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					errs <- err
					for range work { // drain, so the sender never blocks
					}
					return
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
