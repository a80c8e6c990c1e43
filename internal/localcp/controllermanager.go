package localcp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ControllerManagerControllers are the kube-controller-manager controllers the local control
// plane runs: those that finish deletions. Without them `kubectl delete -f
// config/samples/` never returns: namespaces stay Terminating (the namespace controller
// empties and removes them), objects owned by deleted ones stay (the garbage collector),
// and so do pods of a deleted Node (pod GC). Nothing else: trustplane's own controllers
// (clusterrole aggregation among them) are what make run is there to show.
var ControllerManagerControllers = []string{
	"namespace-controller",
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
}

// NodeControllers are the controllers a control plane with a real node runs as well: a
// Deployment's and a DaemonSet's pods, a Service's endpoints (kube-proxy routes by them),
// each namespace's default ServiceAccount and kube-root-ca.crt ConfigMap, which pods need;
// and the node's not-ready taint, which the kubelet registers with, taken off once Ready.
var NodeControllers = []string{
	"node-lifecycle-controller",
	"deployment-controller",
	"replicaset-controller",
	"daemonset-controller",
	"endpointslice-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
}

// controllerManagerStopTimeout is how long kube-controller-manager may take to stop after
// SIGTERM before it is killed.
const controllerManagerStopTimeout = 10 * time.Second

// controllerManager is a kube-controller-manager process of the local control plane.
type controllerManager struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // how the process ended; set before done is closed
	stopped bool  // stop was called
}

// ControllerManagerLog is where the local control plane in dir has kube-controller-manager
// write its log: on the console it would drown the manager's.
func ControllerManagerLog(dir string) string {
	return filepath.Join(dir, "kube-controller-manager.log")
}

// startControllerManager runs binDir's kube-controller-manager against the API server of
// kubeconfig, with the controllers above, no leader election and no serving port (there
// may be other control planes on this machine).
func startControllerManager(dir, binDir, kubeconfig string, controllers []string) (*controllerManager, error) {
	logPath := ControllerManagerLog(dir)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child has a descriptor of its own
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
	}
	cmd := exec.Command(filepath.Join(binDir, "kube-controller-manager"), args...) //nolint:gosec // make run's own binary, from --bin-dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Ctrl-C reaches make run only, which stops the manager before this.
		Setpgid: true,
		// Never outlive make run, even when it is killed.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &controllerManager{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		cm.err = cmd.Wait()
		close(cm.done)
	}()
	return cm, nil
}

// stop ends kube-controller-manager with SIGTERM, killing it after a timeout. An end before
// the first stop is an error too: deletions stopped being finished from then on.
func (cm *controllerManager) stop() error {
	if cm.stopped {
		return nil
	}
	cm.stopped = true
	select {
	case <-cm.done:
		return cm.exit()
	default:
	}
	if err := cm.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling kube-controller-manager: %w", err)
	}
	select {
	case <-cm.done:
		return nil
	case <-time.After(controllerManagerStopTimeout):
		_ = cm.cmd.Process.Kill()
		<-cm.done
		return fmt.Errorf("kube-controller-manager was still running %v after SIGTERM; killed", controllerManagerStopTimeout)
	}
}

// exit describes the end of kube-controller-manager, once done is closed.
func (cm *controllerManager) exit() error {
	if cm.err == nil {
		return fmt.Errorf("kube-controller-manager exited; its log is %s", cm.logPath)
	}
	return fmt.Errorf("kube-controller-manager exited: %w; its log is %s", cm.err, cm.logPath)
}
