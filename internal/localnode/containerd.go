package localnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criNamespace is the containerd namespace of the CRI plugin, where images must be for
// the kubelet to see them.
const criNamespace = "k8s.io"

// containerdConfig is containerd's configuration (version 2, containerd 1.6 and 1.7):
// its own root, state and socket under the node's directory, so it runs beside a system
// containerd; the sandbox image from the imported archives; and
// restrict_oom_score_adj, as runc may not lower a container's OOM score where root lacks
// CAP_SYS_RESOURCE (these machines: "failed to update /proc/self/oom_score_adj").
func (n *Node) containerdConfig() string {
	p := n.paths
	return fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_cdi = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`, p.containerdRoot, p.containerdState, p.containerdSocket, p.containerdSocket+".ttrpc",
		n.cfg.SandboxImage, cniBinDir, p.cniConfDir)
}

func (n *Node) startContainerd(ctx context.Context) error {
	if err := os.WriteFile(n.paths.containerdConfig, []byte(n.containerdConfig()), 0o600); err != nil {
		return err
	}
	n.cfg.Log("starting containerd (log: %s)", n.paths.containerdLog)
	p, err := startProcess("containerd", n.paths.containerdLog, "containerd", "--config", n.paths.containerdConfig)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, p)
	return waitFor(ctx, 30*time.Second, p, n.paths.containerdLog, func() bool {
		rt, closeConn, err := n.runtimeClient()
		if err != nil {
			return false
		}
		defer closeConn()
		_, err = rt.Version(ctx, &criv1.VersionRequest{})
		return err == nil
	})
}

// importImages imports every archive of ImagesDir into the CRI namespace.
func (n *Node) importImages(ctx context.Context) error {
	archives, err := filepath.Glob(filepath.Join(n.cfg.ImagesDir, "*.tar"))
	if err != nil {
		return err
	}
	for _, archive := range archives {
		// The archives make images wrote, in the directory the caller names.
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.paths.containerdSocket, "--namespace", criNamespace, //nolint:gosec // see above
			"images", "import", archive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s into containerd: %w: %s", archive, err, strings.TrimSpace(string(out)))
		}
	}
	n.cfg.Log("imported %d images from %s", len(archives), n.cfg.ImagesDir)
	return nil
}

// removeSandboxes stops and removes every pod sandbox through the CRI: containerd stops
// the containers, tears the pod network down (CNI DEL, the network namespace) and
// unmounts.
func (n *Node) removeSandboxes(ctx context.Context) error {
	rt, closeConn, err := n.runtimeClient()
	if err != nil {
		return err
	}
	defer closeConn()
	list, err := rt.ListPodSandbox(ctx, &criv1.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &criv1.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return fmt.Errorf("stopping pod sandbox %s (%s/%s): %w", sb.Id, sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &criv1.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			return fmt.Errorf("removing pod sandbox %s: %w", sb.Id, err)
		}
	}
	if len(list.Items) > 0 {
		n.cfg.Log("removed %d pod sandboxes", len(list.Items))
	}
	return nil
}

func (n *Node) runtimeClient() (criv1.RuntimeServiceClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+n.paths.containerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return criv1.NewRuntimeServiceClient(conn), func() { _ = conn.Close() }, nil
}

// waitFor polls ready until it holds, p exits (an error naming its log) or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, p *process, logPath string, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ready() {
		select {
		case <-p.done:
			return p.exitError(logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; its log: %s", p.name, timeout, logPath)
		}
	}
	return nil
}
