// Command run is `make run`: it starts a local control plane (unless $KUBECONFIG names a
// cluster), installs the CRDs, prepares what config/samples needs, and runs `trustplane
// manager` with every controller in this process and `trustplane node-agent` for the
// pod-certificate sample's Node as a child process, and finishes the deletion of that
// Node's pods as its kubelet would. Ctrl-C (or SIGTERM) stops the agent and the manager,
// then kube-controller-manager, kube-apiserver and etcd; etcd's data stays in --dir, so
// objects survive the next `make run`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/cli"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/scheme"
)

// cliName is the name under which this program is the trustplane CLI (see main).
const cliName = "trustplane"

// options are make run's flags; arguments after them go to `trustplane manager`.
type options struct {
	dir         string
	binDir      string
	addrs       localcp.Addresses
	managerArgs []string
	// node runs a real node (containerd, kubelet, kube-proxy) for sample-node where
	// the machine allows it; nodeBinDir holds kubelet and kube-proxy, imagesDir the
	// images make images built.
	node                  bool
	nodeBinDir, imagesDir string
}

func main() {
	// make run starts its node agent as this same program under the name "trustplane": it
	// holds the whole trustplane CLI, so there is no second binary to build or find.
	if filepath.Base(os.Args[0]) == cliName {
		os.Exit(runCLI(os.Args[1:]))
	}
	opts := options{addrs: localcp.DefaultAddresses()}
	flag.StringVar(&opts.dir, "dir", ".local", "Directory for the local control plane's data and kubeconfig, and the node agent's pod certificates.")
	flag.StringVar(&opts.binDir, "bin-dir", envOr("KUBEBUILDER_ASSETS", "bin/k8s"), "Directory with kube-apiserver, etcd, kube-controller-manager and kubectl.")
	binRoot := envOr("TRUSTPLANE_BIN", "bin")
	flag.BoolVar(&opts.node, "node", true, "Run a real node for sample-node (Linux, root, containerd): its pods run. Without it, or where it cannot run, sample-node is a stand-in.")
	flag.StringVar(&opts.nodeBinDir, "node-bin-dir", filepath.Join(binRoot, "node"), "Directory with kubelet and kube-proxy (make node-bins).")
	flag.StringVar(&opts.imagesDir, "images-dir", filepath.Join(binRoot, "images"), "Directory with the image archives to import into the node (make images).")
	flag.StringVar(&opts.addrs.Probes, "health-probe-bind-address", opts.addrs.Probes, "Address of the manager's /healthz and /readyz.")
	flag.StringVar(&opts.addrs.Metrics, "metrics-bind-address", opts.addrs.Metrics, "Address of the manager's /metrics.")
	flag.StringVar(&opts.addrs.JWKS, "jwks-server-bind-address", opts.addrs.JWKS, "Address of the manager's JWKS server.")
	flag.StringVar(&opts.addrs.NodeAgentMetrics, "node-agent-metrics-bind-address", opts.addrs.NodeAgentMetrics, "Address of the node agent's /metrics.")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags] [-- trustplane manager flags]\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	opts.managerArgs = flag.Args()
	if err := run(opts); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
}

// runCLI is `trustplane <args>`, as cmd/trustplane runs it.
func runCLI(args []string) int {
	ctx := ctrl.SetupSignalHandler()
	root := cli.NewRootCommand()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: %v\n", err)
		return 1
	}
	return 0
}

func run(opts options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := filepath.Abs(opts.dir)
	if err != nil {
		return err
	}
	for _, p := range []*string{&opts.binDir, &opts.nodeBinDir, &opts.imagesDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	local, selfReference := useLocalControlPlane(os.Getenv("KUBECONFIG"), dir)
	if selfReference {
		fmt.Printf("$KUBECONFIG is make run's own %s: ignoring it, as its cluster stopped with the last make run\n", localcp.KubeconfigPath(dir))
	}
	reservation := wantNode(opts, local)
	// Last: the API server binds the node's address, which goes with the reservation.
	defer func() {
		if err := reservation.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "removing the node's network:", err)
		}
	}()
	target, err := startTarget(dir, opts.binDir, local, reservation != nil)
	if err != nil {
		return err
	}
	defer target.stop()
	if err := prepare(ctx, target, reservation != nil); err != nil {
		return err
	}
	if reservation != nil {
		node, err := startNode(ctx, reservation, target, dir, opts)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Println("stopping node", localcp.SampleNodeName, "(its pods' containers and networks go; the Pod objects stay) ...")
			if err := node.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the node:", err)
			}
		}()
		target.node = node
	}
	return runTrustplane(ctx, target, dir, opts)
}

// runTrustplane runs the node agent as a child process and the manager in this process
// until ctx ends or the agent or kube-controller-manager dies (which stops the manager
// too); the agent is stopped after the manager. Meanwhile it finishes the deletion of the
// sample Node's pods.
func runTrustplane(ctx context.Context, t *target, dir string, opts options) error {
	agent, err := startChild("node-agent", localcp.NodeAgentArgs(t.kubeconfig, localcp.PodCertDir(dir), opts.addrs.NodeAgentMetrics, t.node == nil))
	if err != nil {
		return err
	}
	defer func() {
		if err := agent.stop(stopTimeout); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node agent:", err)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-agent.done:
			cancel(agent.exited())
		case <-t.controllerManagerExited():
			cancel(t.local.ControllerManagerExit())
		case <-t.nodeExited():
			cancel(fmt.Errorf("node %s: a daemon exited; logs in %s", localcp.SampleNodeName, filepath.Join(dir, "node")))
		case <-ctx.Done():
		}
	}()
	if t.node == nil {
		go finishPodDeletions(ctx, t.config)
	}

	go announceWhenReady(ctx, guide{addrs: opts.addrs, dir: dir, binDir: opts.binDir, local: t.local != nil})
	root := cli.NewRootCommand()
	root.SetArgs(append(localcp.ManagerArgs(t.kubeconfig, opts.addrs), opts.managerArgs...))
	if err := root.ExecuteContext(ctx); err != nil {
		return err
	}
	// The manager stops cleanly on a signal, and also when the agent died: say which.
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// finishPodDeletions stands in for the sample Node's kubelet in removing its terminating
// pods, so that `kubectl delete -f config/samples/` finishes (see
// localcp.FinishPodDeletions), until ctx ends.
func finishPodDeletions(ctx context.Context, cfg *rest.Config) {
	report := func(err error) { fmt.Fprintln(os.Stderr, "make run:", err) }
	if err := localcp.FinishPodDeletions(ctx, cfg, localcp.SampleNodeName, report); err != nil {
		report(fmt.Errorf("finishing the deletion of pods on node %s: %w", localcp.SampleNodeName, err))
	}
}

// target is the cluster make run runs the controllers against.
type target struct {
	config *rest.Config
	// kubeconfig goes to the manager and agent as --kubeconfig; empty: they read $KUBECONFIG.
	kubeconfig string
	// local is the control plane make run started; nil when $KUBECONFIG names the cluster.
	local *localcp.ControlPlane
	// node is sample-node's real node; nil where sample-node is a stand-in.
	node *localnode.Node
}

// nodeExited is closed when a daemon of the real node ends; never without one.
func (t *target) nodeExited() <-chan struct{} {
	if t.node == nil {
		return nil
	}
	return t.node.Exited()
}

// startTarget starts the local control plane (ready for a node when withNode), or
// connects to $KUBECONFIG's cluster.
func startTarget(dir, binDir string, local, withNode bool) (*target, error) {
	if !local {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading $KUBECONFIG: %w", err)
		}
		fmt.Printf("running against the cluster of $KUBECONFIG at %s\n", cfg.Host)
		return &target{config: cfg}, nil
	}
	fmt.Printf("starting a local kube-apiserver, etcd and kube-controller-manager (data in %s) ...\n", dir)
	opts := localcp.Options{}
	if withNode {
		opts = localcp.Options{Node: true, BindAddress: localnode.NodeIP}
	}
	cp, err := localcp.Start(dir, binDir, opts)
	if err != nil {
		return nil, err
	}
	return &target{config: cp.Config, kubeconfig: cp.KubeconfigPath, local: cp}, nil
}

// controllerManagerExited is closed when the local control plane's kube-controller-manager
// ends; never for a cluster make run did not start.
func (t *target) controllerManagerExited() <-chan struct{} {
	if t.local == nil {
		return nil
	}
	return t.local.ControllerManagerExited()
}

// stop stops the local control plane, if make run started one; its data stays.
func (t *target) stop() {
	if t.local == nil {
		return
	}
	fmt.Println("stopping the local control plane ...")
	if err := t.local.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
	}
}

// useLocalControlPlane decides where make run runs: on its own local control plane unless
// $KUBECONFIG names a cluster. A $KUBECONFIG naming nothing but make run's own kubeconfig
// (what make run told the shell to export) names no cluster: that one stopped with the
// make run that wrote it, and make run is here to start it again. selfReference says
// $KUBECONFIG was ignored for that reason.
func useLocalControlPlane(kubeconfigEnv, dir string) (local, selfReference bool) {
	own := canonicalPath(localcp.KubeconfigPath(dir))
	named := false
	for _, path := range filepath.SplitList(kubeconfigEnv) {
		if path == "" {
			continue // kubectl skips empty entries too
		}
		if canonicalPath(path) != own {
			return false, false
		}
		named = true
	}
	return true, named
}

// canonicalPath is path made absolute and clean, with symbolic links resolved as far as
// they exist: the file itself may not have been written yet.
func canonicalPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved
	}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(parent, filepath.Base(abs))
	}
	return abs
}

// prepare installs the CRDs and, on the local control plane only, the stand-in Node (when
// no real node runs) and the kubeconfig Secret of the brought-along Cluster sample: a cluster admin's credential is never written into
// a cluster make run did not start.
func prepare(ctx context.Context, t *target, realNode bool) error {
	if err := installCRDs(ctx, t.config); err != nil {
		return err
	}
	if t.local == nil {
		return nil
	}
	if !realNode {
		if err := localcp.ApplyStandInNode(ctx, t.config); err != nil {
			return err
		}
	}
	if err := localcp.WriteSampleClusterKubeconfig(ctx, t.config); err != nil {
		return fmt.Errorf("preparing the brought-along Cluster sample: %w", err)
	}
	fmt.Printf("wrote Secret %s/%s: a kubeconfig of this control plane, for the Cluster sample\n",
		localcp.SampleClusterNamespace, localcp.SampleClusterSecret)
	return nil
}

func installCRDs(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	if err := localcp.InstallCRDs(ctx, c, crds); err != nil {
		return err
	}
	// As a real install has them (the role-aggregation sample aggregates under make run as
	// in a cluster).
	return config.InstallPolicies(ctx, c, "default")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
