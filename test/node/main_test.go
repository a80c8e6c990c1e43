// Package node runs trustplane as shipped: the images `make images` built, imported into
// the containerd of a real node (internal/localnode: Debian's containerd and runc, a
// kubelet, kube-proxy and kube-scheduler v1.37.1 built from the k8s.io/kubernetes module,
// pods on a bridge of their own), the chart installed with the helm the project builds,
// and each system proven through pods: go-oidc against the JWKS nginx pods through their
// Service, a podCertificate volume the kubelet's own PodCertificate manager fills from
// trustplane's signer, the data-plane sidecar feeding an nginx container in its pod, and
// a pod using a kubeconfig a KubeconfigRequest issued.
//
// It needs Linux and root (hack/install-node-deps.sh installs the rest; make test runs
// it first). Not root: every test is skipped, saying why. Root without the packages or
// builds: the suite fails, naming what is missing.
package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/internal/version"
)

// nodeName is the node's name.
const nodeName = "node-1"

var (
	// skipReason is why this machine cannot run a node; "" when it can.
	skipReason string
	// cp is the control plane, c an admin client of it, kubeconfig its admin kubeconfig.
	cp         *localcp.ControlPlane
	c          client.Client
	kubeconfig string
	// nodeDir is the node's directory (the kubelet's root dir is under it).
	nodeDir string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root := testenv.RepoRoot()
	nodeBin, images := filepath.Join(root, "bin", "node"), filepath.Join(root, "bin", "images")
	if err := localnode.Preflight(nodeBin, images); err != nil {
		if runtime.GOOS != "linux" || os.Geteuid() != 0 {
			skipReason = err.Error()
			return m.Run()
		}
		fmt.Fprintln(os.Stderr, "test/node:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "tpnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	netnsBefore := netns()
	stop, err := start(dir, filepath.Join(root, "bin", "k8s"), nodeBin, images)
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "test/node:", err)
		return 1
	}
	code := m.Run()
	stop()
	// What make run's Ctrl-C promises: nothing of the node stays behind.
	if left := leftovers(dir, netnsBefore); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "test/node: the stopped node left behind:", strings.Join(left, "; "))
		return 1
	}
	return code
}

// leftovers are what a stopped node in dir left: processes naming dir, mounts under it,
// network namespaces that were not there before, the bridge, the forwarding chain.
func leftovers(dir string, netnsBefore map[string]bool) []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if cmdline, err := os.ReadFile(p); err == nil && bytes.Contains(cmdline, []byte(dir)) && !bytes.Contains(cmdline, []byte("node.test")) {
			left = append(left, "process "+strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
		}
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mounts, []byte(" "+dir+"/")) {
		left = append(left, "mounts under "+dir)
	}
	for ns := range netns() {
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

// netns are the named network namespaces of pods (containerd's CRI pins them there as
// cni-<id>); others are not the node's: the chaos suite, which make test runs beside this
// one, puts each manager replica in a namespace of its own.
func netns() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") {
			names[e.Name()] = true
		}
	}
	return names
}

// start brings up the control plane and the node; stop takes down what was started.
func start(dir, k8sBin, nodeBin, images string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	log := func(format string, args ...any) { fmt.Printf("node: "+format+"\n", args...) }
	reservation, err := localnode.Reserve(log)
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = reservation.Release() })
	if cp, err = localcp.Start(filepath.Join(dir, "cp"), k8sBin, localcp.Options{Node: true, BindAddress: localnode.NodeIP}); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = cp.Stop() })
	kubeconfig = cp.KubeconfigPath
	if c, err = client.New(cp.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return stop, err
	}
	kubelet, proxy, scheduler, err := cp.NodeKubeconfigs(nodeName)
	if err != nil {
		return stop, err
	}
	ca, err := localcp.KubeletClientCA(filepath.Join(dir, "cp"))
	if err != nil {
		return stop, err
	}
	nodeDir = filepath.Join(dir, "node")
	node, err := localnode.Start(context.Background(), reservation, localnode.Config{
		Dir: nodeDir, Name: nodeName, NodeBinDir: nodeBin, ImagesDir: images, SandboxImage: version.Image("pause"),
		KubeletKubeconfig: kubelet, ProxyKubeconfig: proxy, SchedulerKubeconfig: scheduler, KubeletClientCA: ca,
		Log: log,
	})
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() {
		if err := node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node:", err)
		}
	})
	return stop, nil
}

// needNode skips t where no node can run.
func needNode(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip("no node on this machine:", skipReason)
	}
}
