// Package localnode runs a real Kubernetes node on this machine for `make run` and the
// test/node suite: Debian's containerd (with runc and the CNI plugins), a kubelet and a
// kube-proxy built from the k8s.io/kubernetes module, and the images `make images` built,
// imported into containerd (no registry is reachable). Pods get addresses on a bridge of
// their own, routed to nothing but the node and the Service range: nothing leaves the
// machine. Stop removes every pod sandbox (through containerd's CRI, which tears their
// networks down), stops the processes and removes the bridge, mounts and rules, so that
// nothing is left behind and the next Start begins clean.
//
// A node needs Linux, root, and containerd, runc and the CNI plugins installed
// (hack/install-node-deps.sh); Preflight says in one line what is missing.
package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// Network of the node: the bridge, its address (the node's address, and so the address
// the local API server binds for pods to reach it) and the pod subnet on it.
const (
	BridgeName  = "tpnode0"
	NodeIP      = "10.217.0.1"
	PodSubnet   = "10.217.0.0/24"
	ServiceCIDR = "10.96.0.0/12"
)

// Config says where a node keeps its state and what it runs.
type Config struct {
	// Dir holds the node's state: containerd's, the kubelet's, logs.
	Dir string
	// Name is the Node's name.
	Name string
	// NodeBinDir holds kubelet, kube-proxy and kube-scheduler.
	NodeBinDir string
	// ImagesDir holds the archives `make images` wrote (every *.tar is imported).
	ImagesDir string
	// SandboxImage is the pause image's reference (one of the archives).
	SandboxImage string
	// KubeletKubeconfig is the node's identity (system:node:<Name>, group system:nodes);
	// ProxyKubeconfig kube-proxy's (system:kube-proxy); SchedulerKubeconfig
	// kube-scheduler's (system:kube-scheduler).
	KubeletKubeconfig, ProxyKubeconfig, SchedulerKubeconfig []byte
	// KubeletClientCA is the CA whose certificates the kubelet accepts from the API
	// server (its --kubelet-client-certificate), PEM.
	KubeletClientCA []byte
	// Log receives one line per step.
	Log func(format string, args ...any)
	// SyncFrequency is the kubelet's syncFrequency: how often it syncs each pod, and so
	// refreshes its ConfigMap, Secret and projected volumes (0: DefaultSyncFrequency).
	// make bench-podcert-propagation sets the kubelet's own default, 1m, to measure what a
	// stock node does.
	SyncFrequency time.Duration
}

// DefaultSyncFrequency is the node's syncFrequency unless Config says otherwise: 10 s,
// not the kubelet's 1m, so that a rotated JWK Set reaches nginx quickly.
const DefaultSyncFrequency = 10 * time.Second

// Node is a running node.
type Node struct {
	cfg       Config
	paths     paths
	processes []*process // started in order, stopped in reverse
}

// Preflight says why no node can run here, or nil.
func Preflight(nodeBinDir, imagesDir string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("a node needs Linux, this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("a node needs root (containerd, the kubelet and pod networks do)")
	}
	for _, tool := range []string{"containerd", "runc", "ctr", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("a node needs %s (hack/install-node-deps.sh installs Debian's containerd, runc, containernetworking-plugins, iptables, iproute2)", tool)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			return fmt.Errorf("a node needs the CNI plugin %s in %s (Debian's containernetworking-plugins)", plugin, cniBinDir)
		}
	}
	for _, bin := range []string{"kubelet", "kube-proxy", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(nodeBinDir, bin)); err != nil {
			return fmt.Errorf("a node needs %s (make node-bins builds it)", filepath.Join(nodeBinDir, bin))
		}
	}
	archives, _ := filepath.Glob(filepath.Join(imagesDir, "*.tar"))
	if len(archives) == 0 {
		return fmt.Errorf("a node needs the images in %s (make images builds them)", imagesDir)
	}
	return nil
}

// Reservation is the machine's node lock, taken, and the pod network set up: the local
// API server binds the node's address before the node starts.
type Reservation struct{ lock *os.File }

// Reserve takes the machine's node lock, waiting (logging once) for another node of this
// machine to stop, and sets the pod network up.
func Reserve(log func(string, ...any)) (*Reservation, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	lock, err := lockMachine(log)
	if err != nil {
		return nil, err
	}
	if err := SetUpNetwork(); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("pod network: %w", err)
	}
	return &Reservation{lock: lock}, nil
}

// Release removes the pod network and lets another node run. Call it after the node has
// stopped and after the API server bound to the node's address has: an API server whose
// address vanishes under it takes long to stop.
func (r *Reservation) Release() error {
	if r == nil || r.lock == nil {
		return nil
	}
	err := removeNetwork()
	err = errors.Join(err, r.lock.Close())
	r.lock = nil
	return err
}

// Start starts containerd, removes the pod sandboxes an earlier run left, imports the
// images, and starts the kubelet, kube-proxy and kube-scheduler, on the machine r
// reserved (the caller releases it after Stop). On error, what was started is stopped
// again.
func Start(ctx context.Context, r *Reservation, cfg Config) (n *Node, err error) {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if r == nil || r.lock == nil {
		return nil, errors.New("starting a node needs the machine reserved (localnode.Reserve)")
	}
	n = &Node{cfg: cfg, paths: pathsIn(cfg.Dir)}
	// Processes of an earlier run that was killed hard would hold the sockets and ports.
	killStale(n.paths.dir)
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	if err := n.paths.create(); err != nil {
		return nil, err
	}
	if err := n.writeCNIConfig(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	// containerd remembers the sandboxes of a run killed hard: remove them through the CRI,
	// which tears their networks down; the kubelet starts the pods afresh.
	if err := n.removeSandboxes(ctx); err != nil {
		return nil, err
	}
	if err := n.importImages(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubeProxy(ctx); err != nil {
		return nil, err
	}
	if err := n.startScheduler(); err != nil {
		return nil, err
	}
	return n, nil
}

// Exited is closed when one of the node's processes ends before Stop.
func (n *Node) Exited() <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	for _, p := range n.processes {
		go func() {
			<-p.done
			once.Do(func() { close(done) })
		}()
	}
	return done
}

// Stop stops kube-scheduler, kube-proxy and the kubelet, removes every pod sandbox, stops
// containerd, and removes the mounts and kube-proxy's rules; the bridge and the
// forwarding rules go with the Reservation. Pod objects stay in the API server: the next
// Start runs them again.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	var containerd *process
	for i := len(n.processes) - 1; i >= 0; i-- {
		p := n.processes[i]
		if p.name == "containerd" {
			containerd = p
			continue
		}
		errs = append(errs, p.stop())
	}
	if containerd != nil {
		errs = append(errs, n.removeSandboxes(ctx), containerd.stop())
	}
	n.processes = nil
	errs = append(errs, n.removeLeftovers())
	return errors.Join(errs...)
}
