//go:build bench

// Package benchfloor runs a benchmark's floor controller as a process of its own, as the
// trustplane manager it is compared with is: the bench's own binary, started again with
// the flags that select its floor mode.
//
// Run inside the bench's process, a floor's workers shared that process's threads with
// the goroutines creating the objects, which then slowed down whenever the workers were
// busy: a back-pressure that the manager's creators never met. In one bench-jwks run the
// floor's creators finished 4.5 s after trustplane's, and the floor's p50 came out a third
// lower than trustplane's for the same time to all Ready.
package benchfloor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// readyLine is what a floor's controller prints once it watches what it serves: the bench
// creates nothing before it.
const readyLine = "floor controller watching"

// Ready says, from the floor's controller, that its watches are open.
func Ready() { fmt.Println(readyLine) }

// Process is a running floor's controller.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited; err is then how
	err    error
	once   sync.Once
}

// Start runs the bench's own binary with args (its floor mode) and returns once the
// floor's controller has said Ready. Its standard error and, after the ready line, its
// standard output are the bench's.
func Start(args ...string) (*Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive the bench
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	lines := bufio.NewReader(out)
	first, err := lines.ReadString('\n')
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("the floor's controller did not start: %w", err)
	}
	if first != readyLine+"\n" {
		p.Stop()
		return nil, fmt.Errorf("the floor's controller did not start: it printed %q", first)
	}
	go func() {
		_, _ = io.Copy(os.Stdout, lines) // its figures, once it is done
		if err := cmd.Wait(); err != nil {
			p.err = fmt.Errorf("the floor's controller: %w", err)
		}
		close(p.exited)
	}()
	return p, nil
}

// Failed reports the floor's controller's failure, if it fails; nothing when it exits
// well.
func (p *Process) Failed() <-chan error {
	failed := make(chan error, 1)
	go func() {
		<-p.exited
		if p.err != nil {
			failed <- p.err
		}
	}()
	return failed
}

// Finish waits for the floor's controller to exit, having served everything, and
// returns the CPU seconds it used.
func (p *Process) Finish() (float64, error) {
	select {
	case <-p.exited:
		if p.err != nil {
			return 0, p.err
		}
	case <-time.After(time.Minute):
		return 0, errors.New("the floor's controller did not exit a minute after everything was Ready")
	}
	return (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds(), nil
}

// Stop kills the floor's controller if it still runs.
func (p *Process) Stop() {
	p.once.Do(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
}
