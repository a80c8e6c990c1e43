// Package localcluster starts a local control plane (internal/localcp) with a real node
// beside it (internal/localnode), as test/node and make bench-podcert-propagation run
// them, and says what a stopped one left behind on the machine.
package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/version"
)

// Config says where the cluster keeps its state and what it runs.
type Config struct {
	// Dir holds the control plane's state (Dir/cp) and the node's (Dir/node).
	Dir string
	// K8sBin holds kube-apiserver and etcd; NodeBin kubelet, kube-proxy and
	// kube-scheduler; Images the archives make images built.
	K8sBin, NodeBin, Images string
	// NodeName is the Node's name.
	NodeName string
	// SyncFrequency is the kubelet's (localnode.Config.SyncFrequency; 0: the node's
	// default).
	SyncFrequency time.Duration
	// Log receives one line per step of the node's start.
	Log func(format string, args ...any)
}

// Cluster is a running control plane and node.
type Cluster struct {
	// CP is the control plane, Client an admin client of it.
	CP     *localcp.ControlPlane
	Client client.Client
	// NodeDir is the node's directory (its kubelet's root dir is KubeletRootDir).
	NodeDir string
	stops   []func()
}

// Start takes the machine's node lock, starts the control plane and then the node. On
// error, what was started is stopped again.
func Start(cfg Config) (cl *Cluster, err error) {
	cl = &Cluster{NodeDir: filepath.Join(cfg.Dir, "node")}
	defer func() {
		if err != nil {
			cl.Stop()
			cl = nil
		}
	}()
	reservation, err := localnode.Reserve(cfg.Log)
	if err != nil {
		return cl, err
	}
	cl.stops = append(cl.stops, func() { _ = reservation.Release() })
	cpDir := filepath.Join(cfg.Dir, "cp")
	if cl.CP, err = localcp.Start(cpDir, cfg.K8sBin, localcp.Options{Node: true, BindAddress: localnode.NodeIP}); err != nil {
		return cl, fmt.Errorf("starting the control plane: %w", err)
	}
	cl.stops = append(cl.stops, func() { _ = cl.CP.Stop() })
	if cl.Client, err = client.New(cl.CP.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return cl, err
	}
	kubelet, proxy, scheduler, err := cl.CP.NodeKubeconfigs(cfg.NodeName)
	if err != nil {
		return cl, fmt.Errorf("node credentials: %w", err)
	}
	ca, err := localcp.KubeletClientCA(cpDir)
	if err != nil {
		return cl, err
	}
	node, err := localnode.Start(context.Background(), reservation, localnode.Config{
		Dir: cl.NodeDir, Name: cfg.NodeName, NodeBinDir: cfg.NodeBin, ImagesDir: cfg.Images, SandboxImage: version.Image("pause"),
		KubeletKubeconfig: kubelet, ProxyKubeconfig: proxy, SchedulerKubeconfig: scheduler, KubeletClientCA: ca,
		Log: cfg.Log, SyncFrequency: cfg.SyncFrequency,
	})
	if err != nil {
		return cl, fmt.Errorf("starting node %s: %w", cfg.NodeName, err)
	}
	cl.stops = append(cl.stops, func() {
		if err := node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node:", err)
		}
	})
	return cl, nil
}

// Stop stops the node, then the control plane, then releases the machine: the pod
// network goes after the API server that binds its address.
func (cl *Cluster) Stop() {
	for i := len(cl.stops) - 1; i >= 0; i-- {
		cl.stops[i]()
	}
	cl.stops = nil
}

// KubeletRootDir is the kubelet's --root-dir: pods' volumes are under
// pods/<uid>/volumes/<plugin>/<volume>.
func (cl *Cluster) KubeletRootDir() string { return localnode.KubeletRootDir(cl.NodeDir) }

// NetNamespaces are the named network namespaces of pods (containerd's CRI pins them
// there as cni-<id>); others are not a node's: the chaos suite, which make test runs
// beside test/node, puts each manager replica in a namespace of its own.
func NetNamespaces() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") {
			names[e.Name()] = true
		}
	}
	return names
}

// Leftovers are what a stopped cluster in dir left, as make run's Ctrl-C promises there
// is none: processes naming dir (but the caller, whose own arguments may), mounts under
// it, pod network namespaces that were not there before (netnsBefore, NetNamespaces
// taken before Start), the bridge, the forwarding chain.
func Leftovers(dir string, netnsBefore map[string]bool) []string {
	var left []string
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/cmdline"
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if p == self {
			continue
		}
		if cmdline, err := os.ReadFile(p); err == nil && bytes.Contains(cmdline, []byte(dir)) {
			left = append(left, "process "+strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
		}
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mounts, []byte(" "+dir+"/")) {
		left = append(left, "mounts under "+dir)
	}
	for ns := range NetNamespaces() {
		if !netnsBefore[ns] {
			left = append(left, "network namespace "+ns)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", localnode.BridgeName)); err == nil {
		left = append(left, "bridge "+localnode.BridgeName)
	}
	if out, err := exec.Command("iptables", "-w", "-S").Output(); err == nil && bytes.Contains(out, []byte("TRUSTPLANE-NODE")) {
		left = append(left, "iptables chain TRUSTPLANE-NODE")
	}
	return left
}
