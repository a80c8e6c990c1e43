package podcertsigner

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/testenv"
)

// bundleBySigner reads the trust anchors a `clusterTrustBundle` projection by signerName
// gets: kubelet lists ClusterTrustBundles with the field selector spec.signerName (and the
// projection's label selector; ours matches everything) and concatenates them.
func bundleBySigner(t *testing.T, signerName string) (*x509.CertPool, int) {
	t.Helper()
	list := &certificatesv1.ClusterTrustBundleList{}
	if err := env.Client.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.signerName", signerName)}); err != nil {
		t.Fatal(err)
	}
	pool, n := x509.NewCertPool(), 0
	for _, b := range list.Items {
		pool.AppendCertsFromPEM([]byte(b.Spec.TrustBundle))
		n += strings.Count(b.Spec.TrustBundle, "BEGIN CERTIFICATE")
	}
	return pool, n
}

func leafOf(t *testing.T, pcr *certificatesv1.PodCertificateRequest) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(pcr.Status.CertificateChain))
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func issuedOK(t *testing.T, pcr *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	pcr = waitConcluded(t, pcr)
	if c := pcr.Status.Conditions[len(pcr.Status.Conditions)-1]; c.Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("not issued: %+v", c)
	}
	return pcr
}

func verifies(roots *x509.CertPool, leaf *x509.Certificate) error {
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// TestTrustBundleAndTerminatingPods: the signer publishes its CA in the ClusterTrustBundle
// named as upstream names it, a projection by signer name verifies the leaves, a deleted
// or edited bundle comes back, and a terminating pod still gets a certificate, bounded
// by its deletion.
func TestTrustBundleAndTerminatingPods(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName = "trust.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "trust-ca"
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-trust")

	name := BundleName(opts.SignerName)
	if name != "trust.example.com:pods:primary-bundle" {
		t.Fatalf("bundle name %s", name)
	}
	pcr := issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))
	testenv.Eventually(t, "the bundle verifies the leaf", 10*time.Second, func() bool {
		roots, n := bundleBySigner(t, opts.SignerName)
		return n == 1 && verifies(roots, leafOf(t, pcr)) == nil
	})
	ctb := &certificatesv1.ClusterTrustBundle{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, ctb); err != nil {
		t.Fatal(err)
	}
	original := ctb.Spec.TrustBundle
	// The SPIFFE Filesystem Delivery draft's labels: the live bundle of its trust domain.
	for k, v := range map[string]string{certificates.LabelCanarying: certificates.LabelCanaryingLive,
		certificates.LabelWorkloadTrustDomain: opts.TrustDomain, certificates.LabelPeerTrustDomain: opts.TrustDomain} {
		if ctb.Labels[k] != v {
			t.Errorf("bundle label %s=%q, want %q", k, ctb.Labels[k], v)
		}
	}

	// Edited: restored.
	other, _ := bundleFromAnotherCA(t)
	ctb.Spec.TrustBundle = other
	if err := env.Client.Update(ctx, ctb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the edited bundle restored", 10*time.Second, func() bool {
		got := &certificatesv1.ClusterTrustBundle{}
		return env.Client.Get(ctx, client.ObjectKey{Name: name}, got) == nil && got.Spec.TrustBundle == original
	})
	// Deleted: restored.
	if err := env.Client.Delete(ctx, ctb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted bundle restored", 10*time.Second, func() bool {
		got := &certificatesv1.ClusterTrustBundle{}
		return env.Client.Get(ctx, client.ObjectKey{Name: name}, got) == nil && got.Spec.TrustBundle == original && got.UID != ctb.UID
	})

	// A terminating pod (bound to a node, so it stays until the kubelet confirms) still
	// gets certificates, ending at deletionTimestamp + grace period.
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(2400)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("pod not terminating: %v", err)
	}
	term := issuedOK(t, request(t, node, pod, opts.SignerName, "ED25519"))
	want := pod.DeletionTimestamp.Add(2400 * time.Second)
	if !term.Status.NotAfter.Time.Equal(want) {
		t.Errorf("terminating pod: notAfter %v, want deletionTimestamp+grace %v", term.Status.NotAfter, want)
	}
	roots, _ := bundleBySigner(t, opts.SignerName)
	if err := verifies(roots, leafOf(t, term)); err != nil {
		t.Error(err)
	}
}

func bundleFromAnotherCA(t *testing.T) (string, error) {
	t.Helper()
	r := &Reconciler{opts: Options{SignerName: "other", MaxLifetime: time.Hour}}
	ca, err := r.generateCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return string(ca.CertPEM), nil
}

// TestRotationThroughTheAPIServer rotates every few seconds: a new CA is in the bundle
// before it signs, and leaves of the previous CA keep verifying against the bundle.
func TestRotationThroughTheAPIServer(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName = "rotate.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "rotate-ca"
	opts.CARotation, opts.CAOverlap = 4*time.Second, 2*time.Second
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-rotate")

	var leaves []*x509.Certificate
	signedBy := map[string]bool{}
	deadline := time.Now().Add(11 * time.Second)
	for time.Now().Before(deadline) {
		leaf := leafOf(t, issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256")))
		leaves = append(leaves, leaf)
		signedBy[string(leaf.AuthorityKeyId)] = true
		roots, _ := bundleBySigner(t, opts.SignerName)
		for i, l := range leaves {
			if err := verifies(roots, l); err != nil {
				t.Fatalf("leaf %d no longer verifies against the published bundle: %v", i, err)
			}
		}
		time.Sleep(700 * time.Millisecond)
	}
	if len(signedBy) < 2 {
		t.Fatalf("no rotation: %d CAs signed", len(signedBy))
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rotate-ca"}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Annotations["podcert.trustplane.io/reserved-until"] == "" || len(secret.Data["previous.crt"]) == 0 {
		t.Errorf("rotation not persisted: %v", secret.Annotations)
	}
}

// TestNoLeafBeforeItsCAIsPublished: the first request may reach the signer before its CA
// reconcile has applied the ClusterTrustBundle (here it never runs): the CA that signs
// is published first, so no relying party ever holds a leaf it cannot verify.
func TestNoLeafBeforeItsCAIsPublished(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName = "first.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "first-ca"
	r := &Reconciler{Client: env.Client, APIReader: env.Client, Recorder: events.NewFakeRecorder(100), opts: opts, policy: opts.Policy()}
	node, pod := world(t, "signer-first")
	pcr := request(t, node, pod, opts.SignerName, "ECDSAP256")
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pcr)}); err != nil {
		t.Fatal(err)
	}
	leaf := leafOf(t, issuedOK(t, pcr))
	roots, n := bundleBySigner(t, opts.SignerName)
	if n == 0 {
		t.Fatal("a leaf was issued and no ClusterTrustBundle holds its CA")
	}
	if err := verifies(roots, leaf); err != nil {
		t.Errorf("the first leaf does not verify against the published bundle: %v", err)
	}
}
