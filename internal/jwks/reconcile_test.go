package jwks

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// directReconciler drives Reconcile by hand against the real API server, with a fake
// clock and a client that counts writes (and can fail them). No manager runs, so nothing
// else touches the test's objects.
type directReconciler struct {
	*Reconciler
	clock  *clocktesting.FakeClock
	writes atomic.Int32
	fail   atomic.Pointer[error] // fails every write
	// failApply fails server-side applies only: the status patch still records the outcome.
	failApply atomic.Pointer[error]
	events    *events.FakeRecorder
}

func newDirectReconciler(t *testing.T, throttle time.Duration) *directReconciler {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	d := &directReconciler{clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: events.NewFakeRecorder(100)}
	write := func() error {
		if e := d.fail.Load(); e != nil {
			return *e
		}
		d.writes.Add(1)
		return nil
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if e := d.failApply.Load(); e != nil {
				return *e
			}
			if err := write(); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	d.Reconciler = &Reconciler{
		Client: c, Owned: base, APIReader: base,
		Recorder: d.events, Clock: d.clock, Throttle: NewThrottle(throttle), NginxImage: DefaultNginxImage,
		Claims: &issuerclaim.Claims{Namespace: "default", Reader: base},
	}
	return d
}

func (d *directReconciler) reconcile(t *testing.T, ns, name string) (reconcile.Result, error) {
	t.Helper()
	return d.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}

func (d *directReconciler) mustReconcile(t *testing.T, ns, name string) reconcile.Result {
	t.Helper()
	res, err := d.reconcile(t, ns, name)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (d *directReconciler) sawEvent(reason string) bool {
	for {
		select {
		case e := <-d.events.Events:
			if strings.Contains(e, " "+reason+" ") {
				return true
			}
		default:
			return false
		}
	}
}

// TestRotationTimelineOnAFakeClock walks the seed's T0..T3 with a 30-day TTL against
// the real API server, and checks the controller asks to come back exactly when the
// retired key is due.
func TestRotationTimelineOnAFakeClock(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	ttl := 30 * 24 * time.Hour
	first, second := newChain(t, testcerts.P256), newChain(t, testcerts.P384)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "timeline", "tls", withoutNginx, func(c *jwksv1alpha1.JWKSConfig) { c.Spec.OldKeysTTL = jwksv1alpha1.DurationOf(ttl) })
	kid1, _ := expectedDoc(t, first)
	kid2, _ := expectedDoc(t, second)

	d.mustReconcile(t, ns, "timeline") // T0
	if cfg := getConfig(t, ns, "timeline"); cfg.Status.LastKeyID != kid1 || cfg.Status.KeyCount != 1 {
		t.Fatalf("T0: %+v", cfg.Status)
	}

	d.clock.Step(time.Hour) // T1: the certificate rotates
	t1 := d.clock.Now()
	putSecret(t, ns, "tls", tlsData(second))
	res := d.mustReconcile(t, ns, "timeline")
	cfg := getConfig(t, ns, "timeline")
	if cfg.Status.LastKeyID != kid2 || cfg.Status.KeyCount != 2 || !cfg.Status.Keys[1].RetiredAt.Time.Equal(t1) {
		t.Fatalf("T1: %+v", cfg.Status)
	}
	if res.RequeueAfter != ttl {
		t.Errorf("T1: requeue after %v, want the TTL %v", res.RequeueAfter, ttl)
	}

	d.clock.Step(ttl - time.Second) // T2: one second before the old key is due
	res = d.mustReconcile(t, ns, "timeline")
	if getConfig(t, ns, "timeline").Status.KeyCount != 2 || res.RequeueAfter != time.Second {
		t.Fatalf("T2: key count %d, requeue %v", getConfig(t, ns, "timeline").Status.KeyCount, res.RequeueAfter)
	}

	d.clock.Step(time.Second) // T3
	d.mustReconcile(t, ns, "timeline")
	cfg = getConfig(t, ns, "timeline")
	if cfg.Status.KeyCount != 1 || cfg.Status.LastKeyID != kid2 || strings.Contains(getConfigMap(t, ns, "timeline-jwks").Data[jwkset.DocumentKey], kid1) {
		t.Fatalf("T3: %+v", cfg.Status)
	}
	if !d.sawEvent("KeyRemoved") {
		t.Error("T3: no KeyRemoved event")
	}
}

func TestResyncWithNothingChangedMakesNoWrites(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.RSA2048)))
	newJWKSConfig(t, ns, "quiet", "tls")
	d.mustReconcile(t, ns, "quiet")
	if d.writes.Load() == 0 {
		t.Fatal("the first reconcile wrote nothing")
	}
	d.writes.Store(0)
	for range 3 {
		d.clock.Step(time.Minute)
		d.mustReconcile(t, ns, "quiet")
	}
	if n := d.writes.Load(); n != 0 {
		t.Errorf("%d API writes on resync with nothing changed", n)
	}
}

// TestTransientErrorsAreRetriedAndKeepReady: a failing API write is returned (the
// workqueue retries it with backoff), is not terminal, and does not flip a Ready of the
// same generation (the published set is still served); Reconciling says what is retried.
func TestTransientErrorsAreRetriedAndKeepReady(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "flaky", "tls", withoutNginx)
	d.mustReconcile(t, ns, "flaky")

	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	unavailable := error(apierrors.NewServiceUnavailable("etcd is away"))
	d.failApply.Store(&unavailable)
	_, err := d.reconcile(t, ns, "flaky")
	if err == nil || errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	cfg := getConfig(t, ns, "flaky")
	if c := readyCondition(cfg); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready flipped on a transient error: %+v", c)
	}
	if c := condition(cfg, conditions.Reconciling); c == nil || c.Status != metav1.ConditionTrue || c.Reason != conditions.ReasonTransientError ||
		!strings.Contains(c.Message, "apply ConfigMap "+ns+"/flaky-jwks: etcd is away") {
		t.Errorf("Reconciling = %+v", c)
	}
	d.failApply.Store(nil)
	d.mustReconcile(t, ns, "flaky")
	cfg = getConfig(t, ns, "flaky")
	if cfg.Status.KeyCount != 2 || condition(cfg, conditions.Reconciling) != nil {
		t.Errorf("did not recover after the API came back: %+v", cfg.Status)
	}
}

func TestInputErrorsAreTerminal(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", map[string][]byte{corev1.TLSCertKey: []byte("garbage")})
	newJWKSConfig(t, ns, "bad", "tls")
	_, err := d.reconcile(t, ns, "bad")
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("err = %v, want terminal", err)
	}
	if !d.sawEvent(jwksv1alpha1.ReasonInvalidPEM) {
		t.Error("no Warning event")
	}
}

func TestTransientBackoffDoubles5sTo5m(t *testing.T) {
	opts := DefaultOptions()
	limiter := RetryLimiter(opts.RetryBaseDelay, opts.RetryMaxDelay)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "x"}}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, w := range want {
		if got := limiter.When(req); got != w {
			t.Errorf("retry %d: %v, want %v", i+1, got, w)
		}
	}
	limiter.Forget(req)
	if got := limiter.When(req); got != 5*time.Second {
		t.Errorf("after success the backoff restarts at %v, want 5s", got)
	}
}

// TestBurstsAreFoldedIntoOneWrite: the first change goes out at once; changes inside
// the interval wait for its end and go out as one write of the latest state.
func TestBurstsAreFoldedIntoOneWrite(t *testing.T) {
	d := newDirectReconciler(t, time.Minute)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "burst", "tls", withoutNginx)
	d.mustReconcile(t, ns, "burst") // creation: immediate

	d.clock.Step(10 * time.Minute) // quiet period over
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	d.mustReconcile(t, ns, "burst")
	if getConfig(t, ns, "burst").Status.KeyCount != 2 {
		t.Fatal("the first change after a quiet period was not published at once")
	}
	rv := getConfigMap(t, ns, "burst-jwks").ResourceVersion

	var last testcerts.Chain
	var skipped []string
	for i := range 3 { // a burst inside the window
		d.clock.Step(10 * time.Second)
		if last.Leaf != nil {
			kid, _ := expectedDoc(t, last)
			skipped = append(skipped, kid)
		}
		last = newChain(t, testcerts.P256)
		putSecret(t, ns, "tls", tlsData(last))
		res := d.mustReconcile(t, ns, "burst")
		if want := time.Minute - time.Duration(i+1)*10*time.Second; res.RequeueAfter != want {
			t.Errorf("burst %d: requeue after %v, want %v", i, res.RequeueAfter, want)
		}
	}
	if getConfigMap(t, ns, "burst-jwks").ResourceVersion != rv {
		t.Fatal("a change inside the window was written at once")
	}
	d.clock.Step(30 * time.Second) // the window ends
	d.mustReconcile(t, ns, "burst")
	lastKid, _ := expectedDoc(t, last)
	cfg := getConfig(t, ns, "burst")
	// Keys that were current only inside the window were never published, so no token
	// can need them: the set holds the two published keys and the latest.
	if cfg.Status.LastKeyID != lastKid || cfg.Status.KeyCount != 3 {
		t.Errorf("after the window: kid %s keys %d, want the latest key of 3", cfg.Status.LastKeyID, cfg.Status.KeyCount)
	}
	doc := getConfigMap(t, ns, "burst-jwks").Data[jwkset.DocumentKey]
	for _, kid := range skipped {
		if strings.Contains(doc, kid) {
			t.Errorf("a key superseded inside the window was published: %s", kid)
		}
	}
}

// staleConfigMaps answers ConfigMap reads with a snapshot taken earlier: a cache that has
// not seen the controller's last write yet.
type staleConfigMaps struct {
	client.Reader
	snapshot *corev1.ConfigMap
}

func (s staleConfigMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if cm, ok := obj.(*corev1.ConfigMap); ok && key.Name == s.snapshot.Name {
		s.snapshot.DeepCopyInto(cm)
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// TestAStalePlanNeverDropsAKey: planned from a set read before the last rotation, the
// apply is refused instead of publishing a set without the key that rotation added.
func TestAStalePlanNeverDropsAKey(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	first, second, third := newChain(t, testcerts.P256), newChain(t, testcerts.P256), newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "stale", "tls")
	d.mustReconcile(t, ns, "stale")
	before := getConfigMap(t, ns, "stale-jwks")

	putSecret(t, ns, "tls", tlsData(second))
	d.mustReconcile(t, ns, "stale")
	kid2, _ := expectedDoc(t, second)

	putSecret(t, ns, "tls", tlsData(third))
	d.Owned = staleConfigMaps{Reader: d.Owned, snapshot: before}
	if _, err := d.reconcile(t, ns, "stale"); !apierrors.IsConflict(err) {
		t.Errorf("a plan from a stale read: %v, want a conflict", err)
	}
	if doc := getConfigMap(t, ns, "stale-jwks").Data[jwkset.DocumentKey]; !strings.Contains(doc, kid2) {
		t.Errorf("the key of the last rotation (%s) was dropped", kid2)
	}
}
