package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long a child may take to stop after SIGTERM before it is killed;
// the manager's own graceful shutdown timeout is 30s.
const stopTimeout = 30 * time.Second

// child is a trustplane command make run runs as a process of its own.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how the process ended; set before done is closed
}

// startChild runs `trustplane <args>` (this program under the CLI's name, see main), its
// output prefixed with name so that it stands apart from the manager's.
func startChild(name string, args []string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the %s: %w", name, err)
	}
	cmd := exec.Command(self, args...)
	cmd.Args[0] = cliName
	cmd.Stdout = newPrefixWriter(os.Stdout, name+" | ")
	cmd.Stderr = newPrefixWriter(os.Stderr, name+" | ")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Ctrl-C reaches make run only, which stops its children in order.
		Setpgid: true,
		// Never outlive make run, even when it is killed.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop sends SIGTERM and waits for the process to end, killing it after timeout. It
// returns an error if the process did not end cleanly after the signal; an end before
// it is for whoever waits on done to report.
func (c *child) stop(timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling the %s: %w", c.name, err)
	}
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("the %s was still running %v after SIGTERM; killed", c.name, timeout)
	}
}

// exited describes the end of a process that was not asked to stop.
func (c *child) exited() error {
	if c.err == nil {
		return fmt.Errorf("the %s exited", c.name)
	}
	return fmt.Errorf("the %s exited: %w", c.name, c.err)
}

// prefixWriter starts every line written through it with a prefix.
type prefixWriter struct {
	mu          sync.Mutex
	w           io.Writer
	prefix      []byte
	atLineStart bool
}

func newPrefixWriter(w io.Writer, prefix string) *prefixWriter {
	return &prefixWriter{w: w, prefix: []byte(prefix), atLineStart: true}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if p.atLineStart {
			out.Write(p.prefix)
		}
		out.Write(line)
		p.atLineStart = line[len(line)-1] == '\n'
	}
	if _, err := p.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}
