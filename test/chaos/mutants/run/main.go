// Command run is make chaos-mutants: proof that the chaos suite catches the bugs its
// invariants name (issue 40). Each deliberate bug is a patch in test/chaos/mutants whose
// header names the invariant that must catch it and the run that must (systems,
// duration, seed). For each, run applies the patch to a scratch copy of the source tree
// (outside the checkout, with the checkout's uncommitted and untracked files), runs the
// chaos suite there, and counts the mutant caught when the run reports a violation of
// exactly that invariant. It ends with "chaos-mutants: mutants M, caught C" and fails
// unless C = M.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// heavyLock serialises heavy runs on a shared machine: each mutant's chaos run holds it.
const heavyLock = "/tmp/trustplane-heavy.lock"

// summaryPrefix starts the last line of a chaos run that finished (chaos.Result).
const summaryPrefix = "chaos: seed "

func main() {
	only := flag.String("only", "", "comma-separated names of the mutants to run (default: every *.patch)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *only)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-mutants:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, only string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run from the repository's root (make chaos-mutants): %w", err)
	}
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
	}
	mutants, err := loadMutants(filepath.Join(root, "test", "chaos", "mutants"), names)
	if err != nil {
		return err
	}
	caught := 0
	for _, m := range mutants {
		o := runMutant(ctx, root, m)
		fmt.Println(o)
		if o.caught {
			caught++
		}
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
	}
	fmt.Printf("chaos-mutants: mutants %d, caught %d\n", len(mutants), caught)
	if caught != len(mutants) {
		return fmt.Errorf("%d of %d mutants not caught", len(mutants)-caught, len(mutants))
	}
	return nil
}

// outcome is what one mutant's run came to.
type outcome struct {
	m      mutant
	seed   uint64
	caught bool
	// at is when in the chaos run the first violation of the invariant was reported.
	at   string
	took time.Duration
	log  string
	err  error
}

func (o outcome) String() string {
	switch {
	case o.err != nil:
		return fmt.Sprintf("chaos-mutants: %s: NOT caught: %v", o.m.name, o.err)
	case o.caught:
		return fmt.Sprintf("chaos-mutants: %s: caught (%q at %s of the run; seed %d, %s)", o.m.name, o.m.invariant, o.at, o.seed, o.took.Round(time.Second))
	}
	return fmt.Sprintf("chaos-mutants: %s: NOT caught (no violation of %q; seed %d, %s; output in %s)", o.m.name, o.m.invariant, o.seed, o.took.Round(time.Second), o.log)
}

// runMutant applies m to a scratch copy of root and runs the chaos suite there, holding
// the heavy lock throughout.
func runMutant(ctx context.Context, root string, m mutant) (o outcome) {
	o = outcome{m: m, seed: m.seed, log: filepath.Join(root, "bin", "chaos-mutants", m.name+".log")}
	if o.seed == 0 {
		o.seed = rand.Uint64() >> 1 // as the suite picks one: a positive int64
	}
	fmt.Fprintf(os.Stderr, "chaos-mutants: %s: waiting for %s\n", m.name, heavyLock)
	unlock, err := lock(heavyLock)
	if err != nil {
		o.err = err
		return o
	}
	defer unlock()
	start := time.Now()
	defer func() { o.took = time.Since(start) }()
	dir, err := scratchCopy(root)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		o.err = fmt.Errorf("copying the tree: %w", err)
		return o
	}
	if out, err := exec.Command("git", "-C", dir, "apply", m.path).CombinedOutput(); err != nil {
		o.err = fmt.Errorf("%s no longer applies: %s", filepath.Base(m.path), firstLine(string(out)))
		return o
	}
	fmt.Fprintf(os.Stderr, "chaos-mutants: %s: %v of chaos on %s, seed %d (%s)\n", m.name, m.duration, strings.Join(m.systems, ","), o.seed, m.why)
	o.at, o.caught, o.err = chaosRun(ctx, root, dir, m, o.seed, o.log)
	return o
}

// chaosRun runs TestChaos in dir with m's settings, keeping its output in logPath, and
// says whether (and when) it reported a violation of m's invariant. A failing run is no
// error: a violation fails it.
func chaosRun(ctx context.Context, root, dir string, m mutant, seed uint64, logPath string) (at string, caught bool, err error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return "", false, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", false, err
	}
	defer logFile.Close()
	cmd := exec.Command("go", "test", "-count=1", "-v", "-timeout", "30m", "-run", "^TestChaos$", "./test/chaos")
	cmd.Dir = dir
	cmd.Env = chaosEnv(root, m, seed)
	// Its own process group, so that an interrupt reaches the test binary and the
	// control plane it started, not only the go command.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", false, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return "", false, fmt.Errorf("starting the chaos run: %w", err)
	}
	stopWatch := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) })
	defer stopWatch()
	res := scan(io.TeeReader(out, logFile), m.invariant)
	_ = cmd.Wait() // a run that caught the mutant fails
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	if !res.caught && !res.finished {
		// Not a judgement of the mutant: the run broke (a control plane that did not
		// start on a loaded machine, a build error).
		return "", false, fmt.Errorf("the chaos run did not finish (no summary line; output in %s): %s", logPath, res.first)
	}
	return res.at, res.caught, nil
}

// scanned is what a run's output says.
type scanned struct {
	// caught: it reported a violation of the invariant, first at at.
	caught bool
	at     string
	// finished: it printed the summary line; first is its first line.
	finished bool
	first    string
}

// scan reads a run's output to its end.
func scan(r io.Reader, invariant string) scanned {
	var res scanned
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20) // a violation's detail can be long
	for lines.Scan() {
		line := lines.Text()
		if res.first == "" {
			res.first = strings.TrimSpace(line)
		}
		if t, ok := violation(line, invariant); ok && !res.caught {
			res.at, res.caught = t, true
		}
		res.finished = res.finished || strings.HasPrefix(line, summaryPrefix)
	}
	// A line longer than the buffer ends the scan: read the rest so the run is not blocked.
	_, _ = io.Copy(io.Discard, r)
	return res
}

// chaosEnv is the environment of a mutant's run: this one's, without CHAOS_* settings of
// its own, plus the header's, the checkout's tools, and -trimpath so that the scratch
// copy's packages that the patch leaves alone come from the build cache.
func chaosEnv(root string, m mutant, seed uint64) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHAOS_") && !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"CHAOS_SEED="+strconv.FormatUint(seed, 10),
		"CHAOS_DURATION="+m.duration.String(),
		"CHAOS_SYSTEMS="+strings.Join(m.systems, ","),
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"),
		"KUBEBUILDER_ASSETS="+filepath.Join(root, "bin", "k8s"),
		"TRUSTPLANE_BIN="+filepath.Join(root, "bin"),
	)
	if m.faults > 0 {
		env = append(env, "CHAOS_FAULTS="+strconv.Itoa(m.faults))
	}
	return env
}

// scratchCopy copies the source tree as it is — tracked files with their uncommitted
// changes, and untracked files git does not ignore — into a new directory outside it,
// with bin/ a link to the checkout's (the tools built there). It returns the directory
// even on error, for the caller to remove.
func scratchCopy(root string) (string, error) {
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return "", fmt.Errorf("listing the tree's files: %w", err)
	}
	dir, err := os.MkdirTemp("", "trustplane-mutant-")
	if err != nil {
		return "", err
	}
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
			return dir, err
		}
	}
	return dir, os.Symlink(filepath.Join(root, "bin"), filepath.Join(dir, "bin"))
}

// copyFile copies a regular file with its mode; a file deleted in the checkout, and
// anything that is not a regular file, is left out.
func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !info.Mode().IsRegular()) {
		return nil
	}
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, raw, info.Mode().Perm())
}

// lock takes the exclusive flock(2) on path that `flock path <command>` takes, waiting
// for it; the returned function releases it.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing the file releases the lock
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
