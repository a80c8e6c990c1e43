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
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/localnode/localcluster"
	"github.com/trustplane/trustplane/internal/testenv"
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
	netnsBefore := localcluster.NetNamespaces()
	cluster, err := localcluster.Start(localcluster.Config{
		Dir: dir, K8sBin: filepath.Join(root, "bin", "k8s"), NodeBin: nodeBin, Images: images, NodeName: nodeName,
		Log: func(format string, args ...any) { fmt.Printf("node: "+format+"\n", args...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/node:", err)
		return 1
	}
	cp, c, kubeconfig, nodeDir = cluster.CP, cluster.Client, cluster.CP.KubeconfigPath, cluster.NodeDir
	code := m.Run()
	cluster.Stop()
	// What make run's Ctrl-C promises: nothing of the node stays behind.
	if left := localcluster.Leftovers(dir, netnsBefore); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "test/node: the stopped node left behind:", strings.Join(left, "; "))
		return 1
	}
	return code
}

// needNode skips t where no node can run.
func needNode(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip("no node on this machine:", skipReason)
	}
}
