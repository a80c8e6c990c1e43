// Command run is `make run`: it starts a local control plane (unless $KUBECONFIG names a
// cluster), installs the CRDs and runs `trustplane manager` with every controller in this
// process. Ctrl-C stops the manager, then kube-apiserver and etcd; etcd's data stays in
// --dir, so objects survive the next `make run`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/cli"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/scheme"
)

const probeAddr = "127.0.0.1:8081"

func main() {
	dir := flag.String("dir", ".local", "Directory for the local control plane's data and kubeconfig.")
	binDir := flag.String("bin-dir", envOr("KUBEBUILDER_ASSETS", "bin/k8s"), "Directory with kube-apiserver and etcd.")
	flag.Parse()
	if err := run(*dir, *binDir, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, binDir string, managerArgs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	kubeconfig := os.Getenv("KUBECONFIG")
	var cfg *rest.Config
	if kubeconfig == "" {
		fmt.Printf("starting a local kube-apiserver + etcd (data in %s) ...\n", dir)
		cp, err := localcp.Start(dir, binDir)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Println("stopping the local control plane ...")
			if err := cp.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping control plane:", err)
			}
		}()
		cfg, kubeconfig = cp.Config, cp.KubeconfigPath
	} else {
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return fmt.Errorf("loading $KUBECONFIG: %w", err)
		}
	}

	if err := installCRDs(ctx, cfg); err != nil {
		return err
	}
	go announceWhenReady(ctx, kubeconfig)

	root := cli.NewRootCommand()
	root.SetArgs(append([]string{"manager",
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address", "127.0.0.1:8080",
		"--health-probe-bind-address", probeAddr,
	}, managerArgs...))
	return root.ExecuteContext(ctx)
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
	return localcp.InstallCRDs(ctx, c, crds)
}

// announceWhenReady prints the next steps once the manager's readiness probe passes.
func announceWhenReady(ctx context.Context, kubeconfig string) {
	abs, _ := filepath.Abs(kubeconfig)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	fmt.Printf(`
trustplane is ready. In another terminal:

  export KUBECONFIG=%s
  kubectl get crds
  kubectl apply -f config/samples/

Metrics: http://127.0.0.1:8080/metrics   Health: http://%s/readyz
Press Ctrl-C to stop; the cluster's data stays for the next 'make run'.

`, abs, probeAddr)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
