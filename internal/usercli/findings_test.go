package usercli

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/podcert"
)

// TestReconcileHelpListsKinds: reconcile --help lists its kinds one a line, each with its
// controller, not as a Go slice.
func TestReconcileHelpListsKinds(t *testing.T) {
	root := &cobra.Command{Use: "trustplane"}
	AddCommands(root)
	var b bytes.Buffer
	root.SetOut(&b)
	root.SetArgs([]string{"reconcile", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := b.String()
	for _, want := range []string{
		"\n  jwksconfig            JWKSConfig, by the jwks controller\n",
		"\n  cluster               Cluster, by the cluster controller\n",
		"\n  kubeconfigrequest     KubeconfigRequest, by the kubeconfig controller\n",
		"\n  subscriptionrequest   SubscriptionRequest, by the subscription controller\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("reconcile --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "[jwksconfig") {
		t.Errorf("reconcile --help prints its kinds as a Go slice:\n%s", help)
	}
}

// TestRevokedRequestIsNoFailure: a KubeconfigRequest revoked on purpose is shown as
// Revoked and does not make get exit 1; one whose revocation was taken back is.
func TestRevokedRequestIsNoFailure(t *testing.T) {
	revoked := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team", Generation: 2,
		Annotations: map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}},
		Status: operatorv1alpha1.KubeconfigRequestStatus{Conditions: ready(metav1.ConditionFalse, operatorv1alpha1.ReasonRevoked), ObservedGeneration: 2}}
	r := kubeconfigRow(revoked, now)
	r.Kind = kubeconfigKind()
	if r.Ready != metav1.ConditionFalse || r.Reason != operatorv1alpha1.ReasonRevoked || !r.settled() {
		t.Errorf("revoked: %+v", r)
	}
	failing := kubeconfigRow(&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "team"},
		Status: operatorv1alpha1.KubeconfigRequestStatus{Conditions: ready(metav1.ConditionFalse, operatorv1alpha1.ReasonClusterNotReady)}}, now)
	failing.Kind = kubeconfigKind()
	if err := notReady([]row{r}); err != nil {
		t.Errorf("exit status with a revoked request: %v", err)
	}
	rows := []row{r, failing}
	sortRows(rows)
	if rows[0].Name != "f" {
		t.Error("a failing row goes before a revoked one")
	}
	if err := notReady(rows); err == nil || err.Error() != "1 of 2 objects are not Ready" {
		t.Errorf("exit status: %v", err)
	}
	unrevoked := revoked.DeepCopy()
	unrevoked.Annotations[operatorv1alpha1.RevokeAnnotation] = "false" // a new credential is asked for
	if r := kubeconfigRow(unrevoked, now); r.settled() {
		t.Errorf("a request whose revocation is taken back counts as settled: %+v", r)
	}
}

// TestUpdateThrottledRow: while a JWKSConfig's update waits for the minimum update
// interval, get shows UpdateThrottled, not Published.
func TestUpdateThrottledRow(t *testing.T) {
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "issuer", Namespace: "ns", Generation: 1},
		Status: jwksv1alpha1.JWKSConfigStatus{ObservedGeneration: 1, LastKeyID: "kid-a", KeyCount: 1, Conditions: []metav1.Condition{
			{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: jwksv1alpha1.ReasonPublished, Message: "Publishing 1 key(s)"},
			{Type: conditions.Reconciling, Status: metav1.ConditionTrue, Reason: jwksv1alpha1.ReasonUpdateThrottled, Message: "the change is published at 12:05"},
		}}}
	r := jwksRow(cfg, now)
	if r.Ready != metav1.ConditionTrue || r.Reason != jwksv1alpha1.ReasonUpdateThrottled || !strings.Contains(r.Message, "the change is published at 12:05") {
		t.Errorf("throttled: %+v", r)
	}
}

// TestJWKSKeyRoles: describe names each published key by its role, as the status says.
func TestJWKSKeyRoles(t *testing.T) {
	promotion := metav1.NewTime(now.Add(4 * time.Minute))
	retired := metav1.NewTime(now.Add(-time.Hour))
	cfg := &jwksv1alpha1.JWKSConfig{Spec: jwksv1alpha1.JWKSConfigSpec{SigningSecret: "issuer-signing"},
		Status: jwksv1alpha1.JWKSConfigStatus{LastKeyID: "new", SigningKeyID: "previous", PendingKeyID: "new", PendingPromotionTime: &promotion,
			Keys: []jwksv1alpha1.PublishedKey{{KeyID: "new"}, {KeyID: "previous"}, {KeyID: "old", RetiredAt: &retired}}}}
	want := map[string]string{
		"new":      "next: published, promoted to the signing Secret in 4m",
		"previous": "signing (previous: the signing Secret holds it until the next key is promoted)",
		"old":      "retiring: retired 60m ago, kept for the tokens it signed",
	}
	for _, k := range cfg.Status.Keys {
		if got := keyRole(cfg, k, now); got != want[k.KeyID] {
			t.Errorf("%s: %q, want %q", k.KeyID, got, want[k.KeyID])
		}
	}
	cfg.Status.SigningKeyID, cfg.Status.PendingKeyID, cfg.Status.PendingPromotionTime = "new", "", nil
	if got := keyRole(cfg, cfg.Status.Keys[0], now); got != "signing (current, in the signing Secret)" {
		t.Errorf("promoted: %q", got)
	}
	cfg.Spec.SigningSecret = ""
	if got := keyRole(cfg, cfg.Status.Keys[0], now); got != "signing (the current certificate's)" {
		t.Errorf("without a signing Secret: %q", got)
	}
}

// TestAnnotatedPodProjection: a pod opted in by annotation has the projection the node
// agent serves for it, with its request.
func TestAnnotatedPodProjection(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-1",
		Annotations: map[string]string{certificates.SignerAnnotation: "example.com/s"}}}
	pcr := certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: certificatesv1.PodCertificateRequestSpec{PodName: "web", PodUID: "uid-1", SignerName: "example.com/s", StubPKCS10Request: stub},
		Status: certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: podcert.OutcomeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}},
			NotAfter: &metav1.Time{Time: now.Add(time.Hour)}, BeginRefreshAt: &metav1.Time{Time: now.Add(30 * time.Minute)}}}
	reports := podcert.Inspect(podcert.WithAnnotationProjection(pod), []certificatesv1.PodCertificateRequest{pcr}, now)
	if len(reports) != 1 || reports[0].State != podcert.StateFresh || reports[0].KeyType != "ECDSAP256" || len(reports[0].Requests) != 1 {
		t.Fatalf("reports: %+v", reports)
	}
	var b bytes.Buffer
	if err := renderTree(&b, &node{Text: "Pod", Children: projectionNodes(reports, now)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "annotation podcert.trustplane.io/signer-name (served by the node agent, no volume): example.com/s ECDSAP256 state fresh") {
		t.Errorf("tree:\n%s", b.String())
	}
	if podcert.WithAnnotationProjection(&corev1.Pod{}).Spec.Volumes != nil {
		t.Error("a pod not opted in gets a projection")
	}
}
