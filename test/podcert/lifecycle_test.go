package podcert_test

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestTerminatingAndDenied: a terminating pod keeps its credentials and the agent keeps
// refreshing them until the pod object is gone; a request the signer refuses (a key type
// it does not issue) is Denied, the pod gets a Warning event with the reason, and the last
// good credential stays on disk; a pod of another node never gets a request.
func TestTerminatingAndDenied(t *testing.T) {
	ns := env.Namespace(t, "lifecycle")
	const node, finalizer = "node-t", "test.trustplane.io/hold"
	pod := func(name, keyType string, finalizers ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers, Annotations: map[string]string{nodeagent.ServeAnnotation: nodeagent.ServeAgent}},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}},
				Volumes: []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
						SignerName: signer, KeyType: keyType, MaxExpirationSeconds: ptr.To[int32](3600), CredentialBundlePath: "bundle.pem"}}}}}}}},
		}
	}
	other := pod("other-node", "ECDSAP256")
	other.Spec.NodeName = "node-elsewhere"
	for _, obj := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		pod("held", "ECDSAP256", finalizer), pod("refused", "ED25519"), other,
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // let the held pod go whatever happened
		p := &corev1.Pod{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, p) == nil {
			p.Finalizers = nil
			_ = env.Client.Update(ctx, p)
			_ = env.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
		}
	})

	// This signer issues every key type but ED25519.
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace = ns
	signerOpts.KeyTypes = []string{"ECDSAP256", "ECDSAP384"}
	stopSigner := env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })
	t.Cleanup(stopSigner)

	clk := clocktesting.NewFakeClock(time.Now())
	dir := t.TempDir()
	agentOpts := nodeagent.DefaultOptions()
	agentOpts.NodeName, agentOpts.Dir, agentOpts.Clock = node, dir, clk
	agentOpts.RefreshInterval = 100 * time.Millisecond
	agentOpts.MetricsBindAddress, agentOpts.HealthProbeBindAddress = "0", "0"
	agentOpts.Jitter = func() time.Duration { return 0 }
	testenv.Background(t, func(c context.Context) error { return nodeagent.Run(c, env.Config, agentOpts) })

	var roots *x509.CertPool
	testenv.Eventually(t, "the CA", 30*time.Second, func() bool {
		s := &corev1.Secret{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: signerOpts.CASecretName}, s) != nil {
			return false
		}
		roots = x509.NewCertPool()
		return roots.AppendCertsFromPEM(s.Data[corev1.TLSCertKey])
	})
	path := filepath.Join(dir, ns, "held", "id-0", "bundle.pem")
	var first *x509.Certificate
	testenv.Eventually(t, "the held pod's bundle", 30*time.Second, func() bool { var ok bool; first, ok = bundle(t, path, roots); return ok })

	// The refused key type: Denied with the signer's reason, a Warning on the pod, no files.
	testenv.Eventually(t, "a Denied event with a reason on the refused pod", 30*time.Second, func() bool {
		return len(warnings(t, ns, "refused", certificatesv1.PodCertificateRequestConditionTypeDenied)) == 1
	})
	if e := warnings(t, ns, "refused", certificatesv1.PodCertificateRequestConditionTypeDenied)[0]; !strings.Contains(e.Note, "UnsupportedKeyType") {
		t.Errorf("the Denied event does not say why: %q", e.Note)
	}
	if _, err := os.Stat(filepath.Join(dir, ns, "refused", "id-0")); !os.IsNotExist(err) {
		t.Error("a denied projection got files")
	}

	// Terminating: the credentials stay, and at beginRefreshAt a refresh is requested.
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	if err := env.Client.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("the held pod is not terminating: %v", err)
	}
	time.Sleep(time.Second) // ten refresh passes
	if leaf, ok := bundle(t, path, roots); !ok || leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("a terminating pod lost its credential")
	}
	pcrs := requestsOf(t, ns, "held")
	if len(pcrs) != 1 {
		t.Fatalf("PCRs of the held pod: %d", len(pcrs))
	}
	clk.SetTime(pcrs[0].Status.BeginRefreshAt.Add(time.Second))
	testenv.Eventually(t, "a refresh request for the terminating pod", 30*time.Second, func() bool { return len(requestsOf(t, ns, "held")) == 2 })
	// Whatever the signer answers (it may refuse terminating pods), a valid credential stays.
	testenv.Eventually(t, "the refresh request to conclude", 30*time.Second, func() bool {
		for _, p := range requestsOf(t, ns, "held") {
			if len(p.Status.Conditions) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond)
	if _, ok := bundle(t, path, roots); !ok {
		t.Fatal("the terminating pod's credential is gone after its refresh")
	}

	// Gone (no kubelet confirms a graceful deletion here: force it): the credentials go.
	held.Finalizers = nil
	if err := env.Client.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, held, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the gone pod's directory to be removed", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, ns, "held"))
		return os.IsNotExist(err)
	})
	if n := len(requestsOf(t, ns, "other-node")); n != 0 {
		t.Errorf("%d PCRs for another node's pod", n)
	}
}

func requestsOf(t *testing.T, ns, podName string) []certificatesv1.PodCertificateRequest {
	t.Helper()
	return testenv.PodCertificateRequestsOf(t, env.Client, ns, podName)
}

func warnings(t *testing.T, ns, podName, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == podName && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}
