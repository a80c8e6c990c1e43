package podcertsigner

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/testenv"
)

// forbiddenSecrets reads as the client it wraps, except Secrets while forbidden is set:
// a signer whose RBAC lost the CA Secret.
type forbiddenSecrets struct {
	client.Reader
	forbidden bool
}

func (f *forbiddenSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok && f.forbidden {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("RBAC: access denied"))
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

func putCASecret(t *testing.T, name string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	return secret
}

func countEvents(rec *events.FakeRecorder, reason string) int {
	n := 0
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, reason) {
				n++
			}
		default:
			return n
		}
	}
}

// TestRequestsWaitForAUsableCA: while no CA can sign (the Secret unreadable, not parsing
// with no last good CA, mid-rotation with next.crt alone, or its CA not valid yet), a
// request is retried (an error), never concluded, and told why once (WaitingForCA); once
// the CA is usable it is issued.
func TestRequestsWaitForAUsableCA(t *testing.T) {
	realNow := time.Now()
	good, _ := podcert.NewCA("good", realNow, 48*time.Hour)
	future, _ := podcert.NewCA("future", realNow.Add(time.Hour+3*time.Minute), 48*time.Hour) // valid in 3m
	goodData := map[string][]byte{corev1.TLSCertKey: good.CertPEM, corev1.TLSPrivateKeyKey: good.KeyPEM}
	node, pod := world(t, "signer-wait")
	for name, tc := range map[string]struct {
		data   map[string][]byte
		reader func(*forbiddenSecrets)
		fix    func(t *testing.T, secret *corev1.Secret, clk *clocktesting.FakeClock, reader *forbiddenSecrets)
	}{
		"unreadable": {data: goodData, reader: func(f *forbiddenSecrets) { f.forbidden = true },
			fix: func(_ *testing.T, _ *corev1.Secret, _ *clocktesting.FakeClock, f *forbiddenSecrets) {
				f.forbidden = false
			}},
		"does not parse": {data: map[string][]byte{corev1.TLSCertKey: []byte("garbage"), corev1.TLSPrivateKeyKey: good.KeyPEM}},
		"next.crt alone": {data: map[string][]byte{podcert.NextCertKey: good.CertPEM}},
		"not valid yet": {data: map[string][]byte{corev1.TLSCertKey: future.CertPEM, corev1.TLSPrivateKeyKey: future.KeyPEM},
			fix: func(_ *testing.T, _ *corev1.Secret, clk *clocktesting.FakeClock, _ *forbiddenSecrets) {
				clk.Step(3 * time.Minute)
			}},
	} {
		secretName := "wait-" + strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ".", "-")
		secret := putCASecret(t, secretName, tc.data)
		clk := clocktesting.NewFakeClock(realNow)
		opts := DefaultOptions()
		opts.SignerName, opts.CANamespace, opts.CASecretName, opts.Clock = "wait.example.com/"+secretName, "default", secretName, clk
		reader := &forbiddenSecrets{Reader: env.Client}
		if tc.reader != nil {
			tc.reader(reader)
		}
		rec := events.NewFakeRecorder(100)
		r := &Reconciler{Client: env.Client, APIReader: reader, Recorder: rec, opts: opts, policy: opts.Policy()}
		pcr := request(t, node, pod, opts.SignerName, "ECDSAP256")
		for range 3 {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pcr)})
			var waiting *waitingForCA
			if !errors.As(err, &waiting) {
				t.Fatalf("%s: Reconcile returned %v, want it to wait (and be retried)", name, err)
			}
		}
		got := &certificatesv1.PodCertificateRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pcr), got); err != nil || len(got.Status.Conditions) != 0 {
			t.Fatalf("%s: a waiting request was concluded: %+v (%v)", name, got.Status.Conditions, err)
		}
		if n := countEvents(rec, certificates.ReasonWaitingForCA); n != 1 {
			t.Errorf("%s: %d WaitingForCA events over three tries, want 1", name, n)
		}
		if tc.fix != nil {
			tc.fix(t, secret, clk, reader)
		} else {
			secret.Data = goodData
			if err := env.Client.Update(ctx, secret); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pcr)}); err != nil {
			t.Fatalf("%s: once the CA is usable: %v", name, err)
		}
		issuedOK(t, pcr)
	}
}

// TestWaitingRequestIsIssuedOnceTheCAIsFixed: with the signer running, a request made
// while the CA Secret is broken stays pending with one WaitingForCA event, and is issued
// as soon as the Secret is fixed, not at its next retry (backed off by then to seconds).
func TestWaitingRequestIsIssuedOnceTheCAIsFixed(t *testing.T) {
	good, _ := podcert.NewCA("good", time.Now(), 48*time.Hour)
	secret := putCASecret(t, "broken-ca", map[string][]byte{corev1.TLSCertKey: []byte("garbage"), corev1.TLSPrivateKeyKey: good.KeyPEM})
	opts := DefaultOptions()
	opts.SignerName, opts.CANamespace, opts.CASecretName = "broken.example.com/pods", "default", secret.Name
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-broken")
	pcr := request(t, node, pod, opts.SignerName, "ECDSAP256")
	testenv.Eventually(t, "a WaitingForCA event on the request", 10*time.Second, func() bool {
		return len(testenv.WarningEvents(t, env.Client, pcr.Namespace, pcr.Name, certificates.ReasonWaitingForCA)) > 0
	})
	time.Sleep(6 * time.Second) // the retries back off past 5s
	got := &certificatesv1.PodCertificateRequest{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pcr), got); err != nil || len(got.Status.Conditions) != 0 {
		t.Fatalf("a request waiting for the CA was concluded: %+v (%v)", got.Status.Conditions, err)
	}
	if evs := testenv.WarningEvents(t, env.Client, pcr.Namespace, pcr.Name, certificates.ReasonWaitingForCA); len(evs) != 1 || evs[0].Series != nil {
		t.Errorf("WaitingForCA recorded %d times (series %v), want once", len(evs), evs[0].Series)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: good.CertPEM, corev1.TLSPrivateKeyKey: good.KeyPEM}
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	issued := issuedOK(t, pcr)
	if took := time.Since(fixed); took > 3*time.Second {
		t.Errorf("issued %v after the CA was fixed: not woken up", took)
	}
	if err := verifies(poolOf(good.Cert), leafOf(t, issued)); err != nil {
		t.Error(err)
	}
}

// TestFollowerHoldsTheCAAndTakesOver: two replicas elect a leader. The follower loads
// and checks the CA as the leader does, but applies no bundle and signs nothing; when the
// leader stops it takes over and issues from the CA it already held.
func TestFollowerHoldsTheCAAndTakesOver(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName, opts.CANamespace, opts.CASecretName = "ha.example.com/pods", "default", "ha-ca"
	replica := func() (*Reconciler, ctrl.Manager, func()) {
		var r *Reconciler
		var m ctrl.Manager
		stop := env.RunManager(t, func(mgr ctrl.Manager) error {
			m = mgr
			var err error
			r, err = Setup(mgr, opts)
			return err
		}, func(o *ctrl.Options) {
			o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID, o.LeaderElectionReleaseOnCancel = true, "default", "signer-ha", true
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(4*time.Second), ptr.To(3*time.Second), ptr.To(200*time.Millisecond)
		})
		return r, m, stop
	}
	elected := func(m ctrl.Manager, within time.Duration) bool {
		select {
		case <-m.Elected():
			return true
		case <-time.After(within):
			return false
		}
	}
	leader, lm, stopLeader := replica()
	if !elected(lm, 20*time.Second) {
		t.Fatal("the first replica was not elected")
	}
	follower, fm, _ := replica()
	node, pod := world(t, "signer-ha")
	first := issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))

	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.CASecretName}, secret); err != nil {
		t.Fatal(err)
	}
	ca, err := podcert.ParseCAPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the follower to hold the CA", 10*time.Second, func() bool {
		c := follower.SigningCA()
		return c != nil && c.Equal(ca.Cert)
	})
	if elected(fm, 0) {
		t.Fatal("both replicas lead: the test shows no follower")
	}
	follower.mu.Lock()
	followerApplied := len(follower.published)
	follower.mu.Unlock()
	leader.mu.Lock()
	leaderApplied := len(leader.published)
	leader.mu.Unlock()
	if followerApplied != 0 || leaderApplied == 0 {
		t.Errorf("bundles applied: by the follower %d CAs, by the leader %d; want only the leader", followerApplied, leaderApplied)
	}
	ctb := &certificatesv1.ClusterTrustBundle{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: BundleName(opts.SignerName)}, ctb); err != nil {
		t.Fatal(err)
	}
	for _, f := range ctb.ManagedFields {
		if f.Manager != FieldOwner {
			t.Errorf("bundle written by %q", f.Manager)
		}
	}

	stopLeader()
	if !elected(fm, 20*time.Second) {
		t.Fatal("the follower did not take over")
	}
	second := issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))
	if err := verifies(poolOf(ca.Cert), leafOf(t, second)); err != nil || leafOf(t, first).CheckSignatureFrom(ca.Cert) != nil {
		t.Errorf("the new leader signed with another CA: %v", err)
	}
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}
