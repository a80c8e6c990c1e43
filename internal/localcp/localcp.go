// Package localcp runs a local Kubernetes control plane (etcd, kube-apiserver and the
// kube-controller-manager controllers that finish deletions, built from source) for `make
// run`. Unlike a test control plane, its state lives in a directory and survives
// restarts, so objects created in one session are there in the next.
package localcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a running local control plane.
type ControlPlane struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// KubeconfigPath is where the admin kubeconfig was written.
	KubeconfigPath string

	env *envtest.Environment
	cm  *controllerManager
}

// Start starts etcd with its data under dir/etcd and a kube-apiserver in front of it,
// writes an admin kubeconfig to dir/kubeconfig and runs kube-controller-manager with
// ControllerManagerControllers through it. binDir holds the binaries.
func Start(dir, binDir string, opts Options) (*ControlPlane, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
		return nil, err
	}
	// A previous run killed with SIGKILL leaves etcd holding the data directory's lock.
	killStale(dir)
	certDir := filepath.Join(dir, "apiserver")
	// The API server's serving certificate is issued anew for every start, from a CA kept
	// in dir (pki/).
	if err := os.RemoveAll(certDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")},
			APIServer: &envtest.APIServer{CertDir: certDir},
		},
	}
	apiServer := env.ControlPlane.APIServer
	apiServer.Configure().Set("service-cluster-ip-range", "10.96.0.0/12")
	addr := opts.BindAddress
	if addr == "" {
		addr = "127.0.0.1"
	}
	// The same port as last time when it is free: kubeconfigs saved elsewhere keep working.
	port, err := keptPort(dir, addr)
	if err != nil {
		return nil, err
	}
	apiServer.ListenAddr = envtest.ListenAddr{Address: addr, Port: strconv.Itoa(port)}
	if err := prepareServing(apiServer, dir, certDir, addr); err != nil {
		return nil, fmt.Errorf("the API server's serving certificate: %w", err)
	}
	authn, err := newClientCertAuthn(dir)
	if err != nil {
		return nil, err
	}
	apiServer.Authn = authn
	if opts.Node {
		if err := configureForNode(apiServer, dir, addr); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting local control plane: %w", err)
	}
	kubeconfig := KubeconfigPath(dir)
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	controllers := ControllerManagerControllers
	if opts.Node {
		controllers = append(controllers, NodeControllers...)
	}
	cm, err := startControllerManager(dir, binDir, kubeconfig, controllers)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControlPlane{Config: cfg, KubeconfigPath: kubeconfig, env: env, cm: cm}, nil
}

// KubeconfigPath is where Start writes the admin kubeconfig of the control plane in dir.
func KubeconfigPath(dir string) string { return filepath.Join(dir, "kubeconfig") }

// Stop stops kube-controller-manager, then kube-apiserver and etcd; the etcd data stays.
func (cp *ControlPlane) Stop() error {
	return errors.Join(cp.cm.stop(), cp.env.Stop())
}

// ControllerManagerExited is closed when kube-controller-manager has ended, before Stop
// too: from then on deletions are no longer finished.
func (cp *ControlPlane) ControllerManagerExited() <-chan struct{} { return cp.cm.done }

// ControllerManagerExit says how kube-controller-manager ended, once
// ControllerManagerExited is closed.
func (cp *ControlPlane) ControllerManagerExit() error {
	return cp.cm.exit()
}

// killStale ends processes left over from an earlier run on the same directory: their
// command lines name it (etcd's --data-dir, the API server's --cert-dir,
// kube-controller-manager's --kubeconfig).
func killStale(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if len(args) == 0 || !isControlPlaneBinary(args[0]) {
			continue
		}
		for _, a := range args[1:] {
			if a == "--data-dir="+filepath.Join(dir, "etcd") || a == "--cert-dir="+filepath.Join(dir, "apiserver") || a == "--kubeconfig="+KubeconfigPath(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

func isControlPlaneBinary(path string) bool {
	base := filepath.Base(path)
	return base == "etcd" || base == "kube-apiserver" || base == "kube-controller-manager"
}

// InstallCRDs applies the CRDs with server-side apply and waits until they are served.
func InstallCRDs(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return fmt.Errorf("converting CRD %s: %w", crd.Name, err)
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("trustplane-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}
