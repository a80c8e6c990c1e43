package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// runOperators runs the Cluster and Kubeconfig controllers until the test ends.
func runOperators(t *testing.T) {
	t.Helper()
	env.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(ctx, mgr); err != nil {
			return err
		}
		if _, err := kubeconfigctrl.Setup(mgr, kubeconfigctrl.DefaultOptions()); err != nil {
			return err
		}
		_, err := clusterctrl.Setup(mgr, clusterctrl.DefaultOptions())
		return err
	})
}

// broughtAlong creates Cluster ns/self: the test API server itself, brought along.
func broughtAlong(t *testing.T, ns string) {
	t.Helper()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self"},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "self-admin"}}})
}

func kubeconfigRequest(ns, name, cluster string) *operatorv1alpha1.KubeconfigRequest {
	return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster, Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
}

func waitKubeconfigReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	kr := &operatorv1alpha1.KubeconfigRequest{}
	testenv.Eventually(t, name+" Ready="+string(status)+" "+reason, 30*time.Second, func() bool {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
			return false
		}
		c := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
		return c != nil && c.Status == status && c.Reason == reason
	})
	return kr
}

func TestKubeconfigRotateRevoke(t *testing.T) {
	runOperators(t)
	ns := env.Namespace(t, "kubeconfig")
	broughtAlong(t, ns)
	create(t, kubeconfigRequest(ns, "reader", "self"), kubeconfigRequest(ns, "lost", "nosuch"))
	first := waitKubeconfigReady(t, ns, "reader", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)

	// Written with mode 0600, also over a file that was more open; a kubeconfig that works.
	dir := t.TempDir()
	file := filepath.Join(dir, "reader.kubeconfig")
	if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := tp(t, "kubeconfig", "reader", "-n", ns, "-o", file)
	if r.ok(t) != "" || !strings.HasPrefix(r.stderr, "wrote the kubeconfig of KubeconfigRequest "+ns+"/reader (Cluster "+ns+"/self, expires in ") {
		t.Errorf("kubeconfig -o: %+v", r)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of %s: %v %v", file, fi.Mode(), err)
	}
	if kc, err := clientcmd.LoadFromFile(file); err != nil || len(kc.AuthInfos) == 0 {
		t.Errorf("not a kubeconfig: %v", err)
	}
	if r := tp(t, "kubeconfig", "reader", "-n", ns); r.ok(t) == "" || !strings.Contains(r.stdout, "kind: Config") {
		t.Errorf("kubeconfig to stdout: %+v", r)
	}
	tp(t, "kubeconfig", "lost", "-n", ns, "-o", filepath.Join(dir, "lost")).fails(t, "KubeconfigRequest "+ns+"/lost is not Ready: ClusterNotReady")
	tp(t, "kubeconfig", "nosuch", "-n", ns).fails(t, `kubeconfigrequest "nosuch" not found in namespace "`+ns+`"`)

	// Rotate: a new credential, the annotation reset.
	out := tp(t, "rotate", "kubeconfigrequest", "reader", "-n", ns, "--wait").ok(t)
	contains(t, out, "kubeconfigrequest/reader: rotated; new credential issued")
	rotated := &operatorv1alpha1.KubeconfigRequest{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), rotated); err != nil {
		t.Fatal(err)
	}
	if rotated.Status.Kubeconfig == first.Status.Kubeconfig || rotated.Annotations[operatorv1alpha1.RotateAnnotation] == "true" {
		t.Error("rotate --wait returned before a new credential was issued")
	}

	// Reconcile: the controller records the request it handled.
	out = tp(t, "reconcile", "kcr", "reader", "-n", ns).ok(t)
	contains(t, out, "kubeconfigrequest/reader: reconciled; Ready=True Issued")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), rotated); err != nil {
		t.Fatal(err)
	}
	if at := rotated.Annotations[conditions.ReconcileRequestedAnnotation]; at == "" || rotated.Status.LastHandledReconcileAt != at {
		t.Errorf("annotation %q, lastHandledReconcileAt %q", at, rotated.Status.LastHandledReconcileAt)
	}
	out = tp(t, "reconcile", "cluster", "self", "-n", ns).ok(t)
	contains(t, out, "cluster/self: reconciled; Ready=True AdministratorsBound")

	// Revoke: refused from then on, with the reason; no file written.
	out = tp(t, "revoke", "kcr", "reader", "-n", ns, "--wait").ok(t)
	contains(t, out, "kubeconfigrequest/reader: revoked")
	revoked := filepath.Join(dir, "revoked.kubeconfig")
	tp(t, "kubeconfig", "reader", "-n", ns, "-o", revoked).fails(t, "KubeconfigRequest "+ns+"/reader is revoked")
	if _, err := os.Stat(revoked); !os.IsNotExist(err) {
		t.Errorf("a revoked kubeconfig was written: %v", err)
	}
	tp(t, "rotate", "kcr", "reader", "-n", ns).fails(t, "is revoked: set operator.kyma-project.io/revoke to \"false\"")
	tp(t, "rotate", "cluster", "self", "-n", ns).fails(t, "only a kubeconfigrequest can be rotated, not a cluster")
}

// issuerToPublish creates JWKSConfig ns/issuer (without nginx) and its certificate
// Secret issuer-tls, for the jwks controller to publish.
func issuerToPublish(t *testing.T, ns string) {
	t.Helper()
	chain := newChain(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}},
		&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
			Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}})
}

func TestReconcileJWKSConfig(t *testing.T) {
	ns := env.Namespace(t, "reconcile")
	issuerToPublish(t, ns)

	// No controller: the request is made, and --wait says nobody handled it.
	tp(t, "reconcile", "jwksconfig", "issuer", "-n", ns, "--timeout", "2s").fails(t, "jwksconfig/issuer: timed out after 2s: the controller has not handled the request")
	out := tp(t, "reconcile", "jwksconfig", "issuer", "-n", ns, "--wait=false").ok(t)
	contains(t, out, "jwksconfig/issuer: reconcile requested at ")

	opts := jwks.DefaultOptions()
	opts.ServerBindAddress, opts.MinUpdateInterval, opts.IssuerClaimNamespace = "0", 0, ns
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := jwks.Setup(mgr, opts); return err })
	testenv.Eventually(t, "the JWKSConfig Ready", 30*time.Second, func() bool {
		return strings.Contains(tp(t, "get", "jwks", "issuer", "-n", ns).stdout, "True")
	})
	// Nothing changed: only the annotation brings a reconcile, which records it.
	out = tp(t, "reconcile", "jwksconfig", "issuer", "-n", ns).ok(t)
	contains(t, out, "jwksconfig/issuer: reconciled; Ready=True Published")
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "issuer"}, cfg); err != nil {
		t.Fatal(err)
	}
	if at := cfg.Annotations[conditions.ReconcileRequestedAnnotation]; cfg.Status.LastHandledReconcileAt != at || cfg.Generation != 1 {
		t.Errorf("annotation %q, lastHandledReconcileAt %q, generation %d", at, cfg.Status.LastHandledReconcileAt, cfg.Generation)
	}
	tp(t, "reconcile", "secretchecksum", "x", "-n", ns).fails(t, "a secretchecksum has no reconcile to ask for")
}
