package localnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// stopTimeout is how long a process may take to end after SIGTERM before it is killed.
const stopTimeout = 20 * time.Second

// process is one of the node's daemons, its output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it ended; set before done is closed
}

func startProcess(name, logPath, binary string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	defer func() { _ = logFile.Close() }() // the child has a descriptor of its own
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C in the terminal reaches make run, which stops the
	// node in order, not every daemon at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits; after stopTimeout it kills.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.name, stopTimeout)
	}
}

// exitError says how a process ended early, once done is closed.
func (p *process) exitError(logPath string) error {
	return fmt.Errorf("%s exited (%w); its log: %s", p.name, p.err, logPath)
}

// killStale ends the daemons of an earlier run on dir that was killed hard: their command
// lines name dir. Container shims stay: containerd reconnects to them on start, and the
// sandboxes are then removed through it.
func killStale(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		switch filepath.Base(string(args[0])) {
		case "containerd", "kubelet", "kube-proxy":
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid)
		}
	}
}

func waitGone(pid int) {
	for i := 0; i < 50; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
