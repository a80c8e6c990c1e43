package tlsexpiry

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

func putTLS(t *testing.T, name string, notBefore time.Time, lifetime time.Duration) {
	t.Helper()
	key, _ := testcerts.NewKey(testcerts.P256)
	c, err := testcerts.NewChain(key, name, notBefore, notBefore.Add(lifetime))
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: c.PEM(), corev1.TLSPrivateKeyKey: c.KeyPEM()}}
	if err := env.Client.Create(ctx, s); err != nil {
		cur := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Data = s.Data
		if err := env.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
}

func count(rec *events.FakeRecorder, seen map[string]int) map[string]int {
	for {
		select {
		case e := <-rec.Events:
			seen[strings.Fields(e)[1]]++
		default:
			return seen
		}
	}
}

// TestOncePerCertificateAtTheThresholds walks a 3h certificate on a fake clock: the
// controller asks to come back exactly at each threshold and warns once at each.
func TestOncePerCertificateAtTheThresholds(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(start)
	rec := events.NewFakeRecorder(20)
	r := &Reconciler{Reader: env.Client, Recorder: rec, Clock: clk, MaxCertificateBytes: DefaultMaxCertificateBytes, certs: map[types.NamespacedName]*tracked{}}
	putTLS(t, "web-tls", start, 3*time.Hour) // refresh point +2h, overdue +2h10m, expiry +3h
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web-tls"}}
	seen := map[string]int{}

	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != 2*time.Hour+10*time.Minute+time.Second {
		t.Fatalf("fresh: requeue %v, %v", res.RequeueAfter, err)
	}
	clk.Step(2*time.Hour + 10*time.Minute + time.Second)
	res, _ = r.Reconcile(ctx, req)
	if count(rec, seen)[certificates.ReasonOverdueForRefresh] != 1 || res.RequeueAfter != 50*time.Minute {
		t.Fatalf("overdue: %v, requeue %v", seen, res.RequeueAfter)
	}
	r.Reconcile(ctx, req)
	clk.Step(time.Hour)
	res, _ = r.Reconcile(ctx, req)
	r.Reconcile(ctx, req)
	if count(rec, seen)[certificates.ReasonExpired] != 1 || seen[certificates.ReasonOverdueForRefresh] != 1 || res.RequeueAfter != 0 {
		t.Fatalf("expired: %v, requeue %v", seen, res.RequeueAfter)
	}
	// Renewed: a new certificate gets its own warnings later, and none now.
	putTLS(t, "web-tls", clk.Now(), 3*time.Hour)
	res, _ = r.Reconcile(ctx, req)
	if count(rec, seen)[certificates.ReasonExpired] != 1 || res.RequeueAfter == 0 {
		t.Fatalf("after renewal: %v, requeue %v", seen, res.RequeueAfter)
	}
	clk.Step(4 * time.Hour)
	r.Reconcile(ctx, req)
	if count(rec, seen)[certificates.ReasonExpired] != 2 || seen[certificates.ReasonOverdueForRefresh] != 2 {
		t.Fatalf("second certificate: %v", seen)
	}
}

// TestEventsReachTheSecretThroughTheManager runs the controller for real.
func TestEventsReachTheSecretThroughTheManager(t *testing.T) {
	putTLS(t, "old-tls", time.Now().Add(-3*time.Hour), 2*time.Hour) // already expired
	opts := DefaultOptions()
	opts.Clock = clocktesting.NewFakeClock(time.Now())
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := &corev1.EventList{}
		_ = env.Client.List(ctx, list, client.InNamespace("default"))
		var reasons []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "old-tls" && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		if strings.Contains(strings.Join(reasons, ","), certificates.ReasonExpired) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CertificateExpired event on the Secret (saw %v)", reasons)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
