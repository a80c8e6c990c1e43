package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/trustplane/trustplane/internal/testenv"
)

// controlPlane adds to the test control plane what faults need: restarting
// kube-apiserver in place (same flags, certificates and etcd, so every client's
// kubeconfig and token stay valid) and pausing etcd.
type controlPlane struct {
	env      *testenv.Env
	hostPort string
	logDir   string

	mu            sync.Mutex
	restarted     *exec.Cmd // the kube-apiserver this run started in place of envtest's
	restartedDone chan struct{}
}

func newControlPlane(env *testenv.Env, logDir string) (*controlPlane, error) {
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		return nil, err
	}
	if u.Host == "" {
		u.Host = env.Config.Host
	}
	return &controlPlane{env: env, hostPort: u.Host, logDir: logDir}, nil
}

// apiServerPID finds the running kube-apiserver serving hostPort.
func (cp *controlPlane) apiServerPID() (int, []string, error) {
	_, port, _ := net.SplitHostPort(cp.hostPort)
	return findProcess("kube-apiserver", func(arg string) bool { return arg == "--secure-port="+port })
}

// etcdPID finds the etcd behind the kube-apiserver.
func (cp *controlPlane) etcdPID() (int, error) {
	_, args, err := cp.apiServerPID()
	if err != nil {
		return 0, err
	}
	var servers string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
			servers = v
		}
	}
	if servers == "" {
		return 0, fmt.Errorf("kube-apiserver has no --etcd-servers")
	}
	pid, _, err := findProcess("etcd", func(arg string) bool {
		return strings.HasPrefix(arg, "--listen-client-urls=") && strings.Contains(arg, servers)
	})
	return pid, err
}

// apiServerGracePeriod is how long kube-apiserver may take to stop after SIGTERM before it
// is killed. A pod's default is 30s; the test API server drains its open watches for
// longer than that, so a restart would mostly wait: 10s keeps faults coming.
const apiServerGracePeriod = 10 * time.Second

// restartAPIServer stops kube-apiserver with SIGTERM, as a static pod's restart does, and
// starts it again with the same command line once its port is free; it returns when the
// new one is ready, or an error after timeout.
func (cp *controlPlane) restartAPIServer(ctx context.Context, down time.Duration, timeout time.Duration) (stopped time.Duration, err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	pid, args, err := cp.apiServerPID()
	if err != nil {
		return 0, err
	}
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	start := time.Now()
	// As a kubelet stops a static pod: SIGTERM, then SIGKILL after the grace period.
	killAt := time.Now().Add(apiServerGracePeriod)
	deadline := time.Now().Add(timeout)
	for processAlive(pid) || portOpen(cp.hostPort) {
		if time.Now().After(killAt) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("kube-apiserver did not stop within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped = time.Since(start)
	time.Sleep(down)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = splitEnviron(environ)
	logFile, err := os.OpenFile(filepath.Join(cp.logDir, "kube-apiserver.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return stopped, err
	}
	defer func() { _ = logFile.Close() }()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return stopped, fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	cp.restarted, cp.restartedDone = cmd, done
	return stopped, cp.waitReady(ctx, deadline)
}

// waitReady waits for /readyz to answer ok.
func (cp *controlPlane) waitReady(ctx context.Context, deadline time.Time) error {
	cs, err := kubernetes.NewForConfig(cp.env.Config)
	if err != nil {
		return err
	}
	for {
		body, err := cs.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("/readyz answered %q", body)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready again: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pauseEtcd stops etcd with SIGSTOP for d, then lets it go on: a disk stall or a
// paused VM, as kube-apiserver sees it.
func (cp *controlPlane) pauseEtcd(d time.Duration) error {
	pid, err := cp.etcdPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing etcd: %w", err)
	}
	time.Sleep(d)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resuming etcd: %w", err)
	}
	return nil
}

// stop stops the kube-apiserver this run started, if any, before envtest stops etcd.
func (cp *controlPlane) stop() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.restarted == nil {
		return
	}
	_ = cp.restarted.Process.Signal(syscall.SIGTERM)
	select {
	case <-cp.restartedDone:
	case <-time.After(30 * time.Second):
		_ = cp.restarted.Process.Kill()
		<-cp.restartedDone
	}
}

// findProcess finds the process running a binary named binary with an argument match
// accepts.
func findProcess(binary string, match func(arg string) bool) (int, []string, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if filepath.Base(args[0]) != binary || !processAlive(pid) {
			continue
		}
		for _, a := range args[1:] {
			if match(a) {
				return pid, args, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no running %s found", binary)
}

// processAlive is false for a process that is gone or a zombie.
func processAlive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func portOpen(hostPort string) bool {
	c, err := net.DialTimeout("tcp", hostPort, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func splitEnviron(raw []byte) []string {
	var env []string
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	return env
}
