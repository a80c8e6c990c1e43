package localcp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestObjectsSurviveRestart is make run's promise: stop and start again, and what was
// created before is still there, reachable through the rewritten kubeconfig.
func TestObjectsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "k8s")
	ctx := context.Background()

	cp, err := Start(dir, bin, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c := testenv.KubeconfigClient(t, cp.KubeconfigPath)
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallCRDs(ctx, c, crds); err != nil {
		t.Fatal(err)
	}
	// Installing twice is a no-op, as on every make run.
	if err := InstallCRDs(ctx, c, crds); err != nil {
		t.Fatalf("second install: %v", err)
	}
	obj := &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"},
		Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"},
	}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	firstURL := cp.Config.Host
	saved, err := os.ReadFile(cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd", "member")); err != nil {
		t.Fatalf("etcd data not kept: %v", err)
	}

	cp, err = Start(dir, bin, Options{})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	// A kubeconfig saved before the restart names the same server.
	if cp.Config.Host != firstURL {
		t.Errorf("the API server moved from %s to %s across a restart", firstURL, cp.Config.Host)
	}
	// ... and still authenticates: its client certificate's CA is kept too.
	savedPath := filepath.Join(t.TempDir(), "saved-kubeconfig")
	if err := os.WriteFile(savedPath, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testenv.KubeconfigClient(t, savedPath).List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Errorf("a kubeconfig saved before the restart: %v", err)
	}
	c = testenv.KubeconfigClient(t, cp.KubeconfigPath)
	got := &jwksv1alpha1.JWKSConfig{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("object created before the restart: %v", err)
	}
	if got.Spec.CertificateSecret != "tls" || got.Spec.UpdateStrategy != jwksv1alpha1.UpdateStrategyRolling {
		t.Errorf("object after restart = %+v", got.Spec)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		t.Errorf("kube-system: %v", err)
	}
}

// TestSampleClusterKubeconfigAcrossRestarts: the Secret make run writes for the Cluster
// sample holds a self-contained cluster-admin kubeconfig, and writing it again after a
// restart (new port, new CA, new token signing key) makes it work again.
func TestSampleClusterKubeconfigAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "k8s")
	ctx := context.Background()
	for run := 1; run <= 2; run++ {
		cp, err := Start(dir, bin, Options{})
		if err != nil {
			t.Fatalf("start %d: %v", run, err)
		}
		t.Cleanup(func() { _ = cp.Stop() })
		if err := WriteSampleClusterKubeconfig(ctx, cp.Config); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		admin := testenv.KubeconfigClient(t, cp.KubeconfigPath)
		secret := &corev1.Secret{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: SampleClusterNamespace, Name: SampleClusterSecret}, secret); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["kubeconfig"])
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if cfg.CAFile != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || len(cfg.CAData) == 0 || cfg.BearerToken == "" {
			t.Errorf("run %d: the kubeconfig is not self-contained: %+v", run, cfg)
		}
		sample, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		// Cluster admin: it may read Secrets in every namespace.
		if err := sample.List(ctx, &corev1.SecretList{}); err != nil {
			t.Errorf("run %d: listing Secrets with the sample kubeconfig: %v", run, err)
		}
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOptionsValidate: a bind address that is no IP address fails before etcd starts.
func TestOptionsValidate(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, "127.0.0.1": true, "10.200.0.1": true, "::1": true, "localhost": false, "10.0.0.1:6443": false} {
		if err := (Options{BindAddress: addr}).Validate(); (err == nil) != ok {
			t.Errorf("BindAddress %q: Validate() = %v", addr, err)
		}
	}
}
