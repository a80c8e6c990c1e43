package podcertsigner

import (
	"crypto"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestV1beta1RequestsAreIssued: a 1.35/1.36 kubelet creates its request through v1beta1
// with pkixPublicKey + proofOfPossession; v1 shows it with neither those nor a stub
// request. On an API server that serves v1beta1 (off by default in 1.37, so this test runs
// its own with --runtime-config=certificates.k8s.io/v1beta1=true) the signer reads it
// through v1beta1, verifies the proof and issues.
func TestV1beta1RequestsAreIssued(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(testenv.RepoRoot(), "bin", "k8s")
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	te.ControlPlane.APIServer = &envtest.APIServer{}
	te.ControlPlane.APIServer.Configure().Set("runtime-config", "certificates.k8s.io/v1beta1=true")
	cfg, err := te.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = te.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old-node"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{
		NodeName: "old-node", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	for _, o := range []client.Object{node, sa, pod} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	opts := DefaultOptions()
	opts.CANamespace = "default"
	opts.KeyTypes = []string{"ED25519", "ECDSAP256", "ECDSAP384", "RSA3072"}
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100), opts: opts, policy: Policy{MaxLifetime: opts.MaxLifetime, TrustDomain: "cluster.local",
		KeyTypes: map[string]bool{"ED25519": true, "ECDSAP256": true, "ECDSAP384": true, "RSA3072": true}}}
	for _, kt := range []string{"ED25519", "ECDSAP256", "ECDSAP384", "RSA3072"} {
		key, _, err := podcert.GenerateKeyAndProof(kt)
		if err != nil {
			t.Fatal(err)
		}
		pkix, _ := x509.MarshalPKIXPublicKey(key.Public())
		beta := &certificatesv1beta1.PodCertificateRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "old-"},
			Spec: certificatesv1beta1.PodCertificateRequestSpec{
				SignerName: opts.SignerName, PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: sa.Name, ServiceAccountUID: sa.UID,
				NodeName: types.NodeName(node.Name), NodeUID: node.UID, MaxExpirationSeconds: ptr.To[int32](3600),
				//nolint:staticcheck // SA1019: the deprecated fields are what a 1.35/1.36 kubelet sends.
				PKIXPublicKey: pkix, ProofOfPossession: proof(t, key, string(pod.UID)),
			},
		}
		if err := c.Create(ctx, beta); err != nil {
			t.Fatalf("%s: creating through v1beta1: %v", kt, err)
		}
		v1 := &certificatesv1.PodCertificateRequest{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(beta), v1); err != nil || len(v1.Spec.StubPKCS10Request) != 0 {
			t.Fatalf("%s: v1 view: %v %d", kt, err, len(v1.Spec.StubPKCS10Request))
		}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(v1)}); err != nil {
			t.Fatalf("%s: %v", kt, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(beta), v1); err != nil {
			t.Fatal(err)
		}
		if len(v1.Status.Conditions) != 1 || v1.Status.Conditions[0].Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("%s: %+v", kt, v1.Status.Conditions)
		}
		if leaf := leafOf(t, v1); !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
			t.Errorf("%s: the leaf certifies another key", kt)
		}
	}
}
