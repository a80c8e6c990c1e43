package chaos

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// restartDelay is how long the supervisor waits before starting an exited process again:
// kubelet's first back-off is longer (10s), but the run is about what the restart meets,
// not how long a kubelet waits.
const restartDelay = time.Second

// Proc is a supervised child process: restarted after it exits, as a kubelet restarts a
// container, until the run stops it.
type Proc struct {
	name string
	h    *Harness
	path string
	args []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	output  *bytes.Buffer
	done    chan struct{}
	starts  int
	stopped bool
	exited  chan struct{} // closed when the supervisor has given up (after stop)
}

func startProc(h *Harness, name, path string, args []string) *Proc {
	p := &Proc{name: name, h: h, path: path, args: args, exited: make(chan struct{})}
	p.mu.Lock()
	err := p.startLocked()
	p.mu.Unlock()
	if err != nil {
		h.T.Fatalf("starting %s: %v", name, err)
	}
	go p.supervise()
	return p
}

func (p *Proc) startLocked() error {
	cmd := exec.Command(p.path, p.args...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &p.mu, buf: out}, &lockedWriter{mu: &p.mu, buf: out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.output, p.done = cmd, out, done
	p.starts++
	return nil
}

// supervise restarts the process whenever it exits, until stop.
func (p *Proc) supervise() {
	defer close(p.exited)
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		<-done
		time.Sleep(restartDelay)
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		err := p.startLocked()
		p.mu.Unlock()
		if err != nil {
			p.h.Logf("restarting %s: %v", p.name, err)
			return
		}
	}
}

// lockedWriter appends to a process's output under the Proc's lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Bounded: a long run keeps the last megabyte of an incarnation's output.
	if w.buf.Len() > 4<<20 {
		tail := append([]byte(nil), w.buf.Bytes()[w.buf.Len()-(1<<20):]...)
		w.buf.Reset()
		w.buf.Write(tail)
	}
	return w.buf.Write(b)
}

// Name is the process's name in the run's output.
func (p *Proc) Name() string { return p.name }

// Signal sends sig to the current incarnation; the supervisor restarts it once it exits.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return fmt.Errorf("%s is not running", p.name)
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Running says whether an incarnation is running now.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Output is what the current incarnation wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// Restart sends sig and waits, at most a minute, for the supervisor to start the process
// again: what a fault that kills or stops it returns after.
func (p *Proc) Restart(sig syscall.Signal) error {
	starts := p.Starts()
	if err := p.Signal(sig); err != nil {
		return err
	}
	if !p.waitRestarted(starts, time.Minute) {
		return fmt.Errorf("%s was not started again within a minute", p.name)
	}
	return nil
}

// waitRestarted waits for an incarnation newer than the one counted in starts to run.
func (p *Proc) waitRestarted(starts int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Starts() > starts && p.Running() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// stop ends supervision and stops the process with SIGTERM (SIGKILL after 30s).
func (p *Proc) stop() {
	p.mu.Lock()
	p.stopped = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	<-p.exited
}
