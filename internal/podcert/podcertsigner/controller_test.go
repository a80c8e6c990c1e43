package podcertsigner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	// These tests call Setup themselves: register the collectors as the manager does for
	// the controllers it runs (manager.Controller.Collectors).
	if err := manager.RegisterMetrics(Collectors()...); err != nil {
		panic(err)
	}
	os.Exit(testenv.Main(m, &env))
}

// world creates a Node, a ServiceAccount and a Pod bound to the node.
func world(t *testing.T, ns string) (*corev1.Node, *corev1.Pod) {
	t.Helper()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.PodSpec{
			NodeName: ns + "-node", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	node, pod := &corev1.Node{}, &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns + "-node"}, node); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, pod); err != nil {
		t.Fatal(err)
	}
	return node, pod
}

func request(t *testing.T, node *corev1.Node, pod *corev1.Pod, signer, keyType string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	return requestWith(t, node, pod, signer, keyType, nil)
}

// requestWith is request with the projection's userAnnotations.
func requestWith(t *testing.T, node *corev1.Node, pod *corev1.Pod, signer, keyType string, userAnnotations map[string]string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	sa := &corev1.ServiceAccount{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}, sa); err != nil {
		t.Fatal(err)
	}
	_, proof, err := podcert.GenerateKeyAndProof(keyType)
	if err != nil {
		t.Fatal(err)
	}
	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: signer, PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: sa.Name, ServiceAccountUID: sa.UID,
			NodeUID: node.UID, StubPKCS10Request: proof, UnverifiedUserAnnotations: userAnnotations,
		},
	}
	pcr.Spec.NodeName = types.NodeName(node.Name)
	maxExpiration := int32(7200)
	pcr.Spec.MaxExpirationSeconds = &maxExpiration
	if err := env.Client.Create(ctx, pcr); err != nil {
		t.Fatalf("creating PCR: %v", err)
	}
	return pcr
}

func waitConcluded(t *testing.T, pcr *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := &certificatesv1.PodCertificateRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pcr), got); err != nil {
			t.Fatal(err)
		}
		if concluded(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("PCR %s never concluded", pcr.Name)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestIssuesWithinTheAPIRulesAndDenies(t *testing.T) {
	opts := DefaultOptions()
	opts.CANamespace = "default"
	opts.KeyTypes = []string{"ECDSAP256", "ED25519", "RSA3072"}
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-a")

	for _, kt := range []string{"ECDSAP256", "ED25519", "RSA3072"} {
		pcr := waitConcluded(t, request(t, node, pod, opts.SignerName, kt))
		cond := pcr.Status.Conditions[len(pcr.Status.Conditions)-1]
		if cond.Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("%s: %+v", kt, cond)
		}
		// The chain verifies against the CA the signer created in its Secret.
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.CASecretName}, secret); err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(secret.Data[corev1.TLSCertKey])
		block, _ := pem.Decode([]byte(pcr.Status.CertificateChain))
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: chain does not verify: %v", kt, err)
		}
		if got := leaf.URIs[0].String(); got != "spiffe://cluster.local/ns/signer-a/sa/web" {
			t.Errorf("%s: SPIFFE ID %s", kt, got)
		}
		if lifetime := pcr.Status.NotAfter.Sub(pcr.Status.NotBefore.Time); lifetime != 2*time.Hour {
			t.Errorf("%s: lifetime %v, want maxExpirationSeconds", kt, lifetime)
		}
	}

	// A second signer name is not ours: untouched.
	other := request(t, node, pod, "example.com/other", "ECDSAP256")
	// A key type the signer does not issue.
	rsa4096 := waitConcluded(t, request(t, node, pod, opts.SignerName, "RSA4096"))
	if c := rsa4096.Status.Conditions[0]; c.Type != certificatesv1.PodCertificateRequestConditionTypeDenied || c.Reason != certificatesv1.PodCertificateRequestConditionUnsupportedKeyType {
		t.Errorf("RSA4096: %+v", c)
	}
	// A request naming a pod that is gone.
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	gone := waitConcluded(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))
	if c := gone.Status.Conditions[0]; c.Reason != "PodNotFound" {
		t.Errorf("gone pod: %+v", c)
	}
	// A node replaced under the same name, then a node that is gone.
	node2, pod2 := world(t, "signer-node")
	if err := env.Client.Delete(ctx, node2); err != nil {
		t.Fatal(err)
	}
	if got := waitConcluded(t, request(t, node2, pod2, opts.SignerName, "ECDSAP256")); got.Status.Conditions[0].Reason != "NodeNotFound" {
		t.Errorf("deleted node: %+v", got.Status.Conditions[0])
	}
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node2.Name}}); err != nil {
		t.Fatal(err)
	}
	if got := waitConcluded(t, request(t, node2, pod2, opts.SignerName, "ECDSAP256")); got.Status.Conditions[0].Reason != "NodeMismatch" {
		t.Errorf("replaced node: %+v", got.Status.Conditions[0])
	}
	time.Sleep(300 * time.Millisecond)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil || len(other.Status.Conditions) != 0 {
		t.Errorf("another signer's request was touched: %+v", other.Status)
	}
}

// TestEarliestRefreshIsAccepted: the largest backdate and the earliest refresh the options
// allow are inside what kube-apiserver's validation of an issued status accepts.
func TestEarliestRefreshIsAccepted(t *testing.T) {
	opts := DefaultOptions()
	opts.CANamespace = "default"
	opts.SignerName = "trustplane.io/earliest-refresh"
	opts.RefreshFraction, opts.Backdate = 0.01, MaxBackdate
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-earliest")
	pcr := waitConcluded(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))
	if c := pcr.Status.Conditions[len(pcr.Status.Conditions)-1]; c.Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("%+v", c)
	}
	notBefore, refresh := pcr.Status.NotBefore.Time, pcr.Status.BeginRefreshAt.Time
	if got := refresh.Sub(notBefore); got != 10*time.Minute {
		t.Errorf("beginRefreshAt %v after notBefore, want the API's earliest, 10m", got)
	}
	if back := pcr.CreationTimestamp.Sub(notBefore); back < MaxBackdate-5*time.Second {
		t.Errorf("notBefore %v before the request's creation, want %v", back, MaxBackdate)
	}
}

// TestRequestsNotFromThePodOnItsNodeAreDenied: the API server cross-checks pod and node
// only for kubelets (NodeRestriction); for other requesters the signer does. A request
// naming another node than the pod's (a node agent reaching for another node's pod) or an
// earlier pod's UID is denied, and only the pod's own request on its node is issued.
func TestRequestsNotFromThePodOnItsNodeAreDenied(t *testing.T) {
	opts := DefaultOptions()
	opts.CANamespace = "default"
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	nodeA, _ := world(t, "signer-node-a")
	nodeB, podB := world(t, "signer-node-b")

	otherNode := waitConcluded(t, request(t, nodeA, podB, opts.SignerName, "ECDSAP256"))
	if c := otherNode.Status.Conditions[0]; c.Type != certificatesv1.PodCertificateRequestConditionTypeDenied || c.Reason != certificates.ReasonPodMismatch ||
		!strings.Contains(c.Message, nodeA.Name) || !strings.Contains(c.Message, nodeB.Name) {
		t.Errorf("a request for node %s's pod naming node %s: %+v", nodeB.Name, nodeA.Name, c)
	}
	earlier := podB.DeepCopy()
	earlier.UID = "00000000-0000-0000-0000-000000000000"
	if c := waitConcluded(t, request(t, nodeB, earlier, opts.SignerName, "ECDSAP256")).Status.Conditions[0]; c.Reason != certificates.ReasonPodMismatch {
		t.Errorf("a request naming an earlier pod's UID: %+v", c)
	}
	own := waitConcluded(t, request(t, nodeB, podB, opts.SignerName, "ECDSAP256"))
	if c := own.Status.Conditions[0]; c.Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Errorf("the pod's own request on its node: %+v", c)
	}
}

func TestExistingCAIsUsedAndNeverReplaced(t *testing.T) {
	good, err := podcert.NewCA("good", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "replaced-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: good.CertPEM, corev1.TLSPrivateKeyKey: good.KeyPEM}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: env.Client, APIReader: env.Client, Recorder: rec, opts: Options{CANamespace: "default", CASecretName: "replaced-ca", SignerName: "x", MaxLifetime: time.Hour, Clock: DefaultOptions().Clock}}
	rot, err := r.loadRotationLocked(ctx)
	if err != nil || rot.Current.Fingerprint() != good.Fingerprint() {
		t.Fatalf("existing CA not used: %v", err)
	}
	// The Secret is broken: an event with a reason, and the last good CA signs on.
	secret.Data[corev1.TLSCertKey] = []byte("garbage")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rot, err = r.loadRotationLocked(ctx)
	if err != nil || rot == nil || rot.Current.Fingerprint() != good.Fingerprint() {
		t.Fatalf("a broken Secret replaced the CA: %v", err)
	}
	if e := <-rec.Events; !strings.Contains(e, "InvalidCA") || strings.Contains(e, "PRIVATE") {
		t.Errorf("event %q", e)
	}
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil || string(got.Data[corev1.TLSCertKey]) != "garbage" {
		t.Error("the signer overwrote a Secret it could not parse")
	}
	// Never had a good CA: nothing to sign with, the Secret is still left alone.
	fresh := &Reconciler{Client: env.Client, APIReader: env.Client, Recorder: rec, opts: r.opts}
	if rot, err := fresh.loadRotationLocked(ctx); rot != nil || err != nil {
		t.Errorf("broken Secret: %v %v", rot, err)
	}
}
