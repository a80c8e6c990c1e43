package status

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// countingClient counts the status patches sent to the test API server.
func countingClient(t *testing.T, patches *atomic.Int32) client.Client {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
}

func newConfig(t *testing.T, ns, name string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"}}
	if err := env.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func getConfig(t *testing.T, key client.ObjectKey) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(ctx, key, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestOnePatchOnlyWhenTheStatusChanged: a reconcile sends its status in one merge patch of
// the status subresource, none when nothing changed, and none for an object that is gone.
func TestOnePatchOnlyWhenTheStatusChanged(t *testing.T) {
	ns := namespace(t)
	var patches atomic.Int32
	c := countingClient(t, &patches)
	reconcileOnce := func(cfg *jwksv1alpha1.JWKSConfig, mark func(*jwksv1alpha1.JWKSConfig) error) error {
		p := NewPatcher(cfg)
		_, err := p.Finish(ctx, c, nil, ctrl.Result{}, mark(cfg))
		return err
	}
	ready := func(cfg *jwksv1alpha1.JWKSConfig) error {
		MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
		cfg.Status.KeyCount, cfg.Status.LastKeyID = 1, "kid-1"
		return nil
	}
	key := client.ObjectKeyFromObject(newConfig(t, ns, "once"))

	if err := reconcileOnce(getConfig(t, key), ready); err != nil {
		t.Fatal(err)
	}
	stored := getConfig(t, key)
	if patches.Load() != 1 || !meta.IsStatusConditionTrue(stored.Status.Conditions, conditions.Ready) ||
		stored.Status.KeyCount != 1 || stored.Status.ObservedGeneration != stored.Generation {
		t.Fatalf("after the first reconcile: %d patches, status %+v", patches.Load(), stored.Status)
	}
	for range 3 {
		if err := reconcileOnce(getConfig(t, key), ready); err != nil {
			t.Fatal(err)
		}
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("%d status patches for reconciles that changed nothing", n-1)
	}

	// A field of the status beside the conditions is a change too; the patch carries it
	// and leaves the rest alone.
	if err := reconcileOnce(getConfig(t, key), func(cfg *jwksv1alpha1.JWKSConfig) error {
		cfg.Status.KeyCount = 2
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if stored := getConfig(t, key); patches.Load() != 2 || stored.Status.KeyCount != 2 || stored.Status.LastKeyID != "kid-1" || len(stored.Status.Conditions) != 1 {
		t.Errorf("after changing one field: %d patches, status %+v", patches.Load(), stored.Status)
	}

	// Gone meanwhile: nothing to report, no error.
	gone := getConfig(t, key)
	if err := env.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := reconcileOnce(gone, func(*jwksv1alpha1.JWKSConfig) error { return Waiting("SecretNotFound", "waiting") }); err != nil {
		t.Errorf("status patch of an object that is gone: %v", err)
	}

	// Going, with no finalizer left: not even a request.
	going := newConfig(t, ns, "going")
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	before := patches.Load()
	if err := reconcileOnce(going, func(*jwksv1alpha1.JWKSConfig) error { return Waiting("SecretNotFound", "waiting") }); err != nil || patches.Load() != before {
		t.Errorf("status of an object without finalizers being deleted: %v, %d patches", err, patches.Load()-before)
	}
}

// TestOneWarningEventPerNewFailure: a failure emits one Warning event when it appears,
// none while it is retried unchanged, one more when it changes; waiting emits none
// unless asked to.
func TestOneWarningEventPerNewFailure(t *testing.T) {
	ns := namespace(t)
	recorder := events.NewFakeRecorder(100)
	cfg := newConfig(t, ns, "events")
	denied := func(msg string) error {
		return WriteFailed("apply", cfg, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "events-jwks", errors.New(msg)))
	}
	reconcileOnce := func(err error) {
		t.Helper()
		cfg = getConfig(t, client.ObjectKeyFromObject(cfg))
		if _, ferr := NewPatcher(cfg).Finish(ctx, env.Client, recorder, ctrl.Result{}, err); ferr != nil && !errors.Is(ferr, err) {
			t.Fatal(ferr)
		}
	}
	for _, step := range []struct {
		what   string
		err    error
		events []string // reasons of the Warning events this step emits
	}{
		{"waiting", Waiting("SecretNotFound", "Secret %q does not exist", "tls"), nil},
		{"a refused write", denied("RBAC says no"), []string{"Forbidden"}},
		{"the same, retried", denied("RBAC says no"), nil},
		{"the same, retried again", denied("RBAC says no"), nil},
		{"refused differently", denied("RBAC says no to this too"), []string{"Forbidden"}},
		{"an input error", Stalled("InvalidPEM", "tls.crt holds no PEM block"), []string{"InvalidPEM"}},
		{"the same input error", Stalled("InvalidPEM", "tls.crt holds no PEM block"), nil},
		{"waiting, asking for a warning", Waiting("SecretNotFound", "Secret %q does not exist", "tls").Warn(), []string{"SecretNotFound"}},
		{"the same wait", Waiting("SecretNotFound", "Secret %q does not exist", "tls").Warn(), nil},
		{"a transient error", errors.New("connection refused"), nil},
		{"a transient error worth a warning", Warn(Transient("GardenUnreachable", errors.New("503"))), []string{"GardenUnreachable"}},
		{"the same, retried", Warn(Transient("GardenUnreachable", errors.New("503"))), nil},
		{"the refused write again, after the rest", denied("RBAC says no"), []string{"Forbidden"}},
	} {
		reconcileOnce(step.err)
		var got []string
		for len(recorder.Events) > 0 {
			e := <-recorder.Events
			if !strings.HasPrefix(e, "Warning ") {
				t.Errorf("%s: event %q", step.what, e)
			}
			got = append(got, strings.Fields(e)[1])
		}
		if strings.Join(got, ",") != strings.Join(step.events, ",") {
			t.Errorf("%s: Warning events %v, want %v", step.what, got, step.events)
		}
	}
}

// TestResultsFollowTheOutcome: what controller-runtime is told to do.
func TestResultsFollowTheOutcome(t *testing.T) {
	planned := ctrl.Result{RequeueAfter: time.Hour}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no"))
	for _, tc := range []struct {
		name     string
		err      error
		result   ctrl.Result
		wantErr  bool
		terminal bool
	}{
		{"success keeps the planned result", nil, planned, false, false},
		{"waiting for a watch", Waiting("SecretNotFound", "waiting"), ctrl.Result{}, false, false},
		{"waiting for a time", Waiting("UpdateThrottled", "published at noon").After(time.Minute), ctrl.Result{RequeueAfter: time.Minute}, false, false},
		{"bad input is terminal", Stalled("InvalidPEM", "garbage"), ctrl.Result{}, true, true},
		{"a refused write is retried with backoff", forbidden, ctrl.Result{}, true, false},
		{"a transient error is retried with backoff", apierrors.NewServiceUnavailable("etcd is away"), ctrl.Result{}, true, false},
	} {
		result, err := Result(planned, tc.err)
		if result != tc.result || (err != nil) != tc.wantErr || errors.Is(err, reconcile.TerminalError(nil)) != tc.terminal {
			t.Errorf("%s: (%+v, %v)", tc.name, result, err)
		}
	}
}

// TestAPatchMidwayKeepsTheSpecActedOn: the spec is edited between the reconcile's read and
// a status patch it sends mid-way; the object it goes on with keeps the spec and
// generation it read (the edit brings its own reconcile), and the status patched after
// is for that generation.
func TestAPatchMidwayKeepsTheSpecActedOn(t *testing.T) {
	ns := namespace(t)
	key := client.ObjectKeyFromObject(newConfig(t, ns, "midway"))
	cfg := getConfig(t, key)
	edited := cfg.DeepCopy()
	edited.Spec.CertificateSecret = "other"
	if err := env.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	p := NewPatcher(cfg)
	cfg.Status.LastKeyID = "kid-1"
	if err := p.Patch(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	if cfg.Spec.CertificateSecret != "tls" || cfg.Generation != 1 {
		t.Errorf("after the patch: secret %q, generation %d; want the spec as read (tls, 1)", cfg.Spec.CertificateSecret, cfg.Generation)
	}
	MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
	if _, err := p.Finish(ctx, env.Client, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	stored := getConfig(t, key)
	if stored.Generation != 2 || stored.Status.ObservedGeneration != 1 || stored.Status.LastKeyID != "kid-1" {
		t.Errorf("stored: generation %d, observedGeneration %d, lastKeyID %q; want 2, 1, kid-1", stored.Generation, stored.Status.ObservedGeneration, stored.Status.LastKeyID)
	}
}

// TestAStaleReadKeepsConditionsWrittenSince: a reconcile that read the object before the
// last status write (a cache that had not shown it yet) writes the conditions it changed
// and leaves the ones that write set alone. Merge-patched as read, the conditions list
// went back whole to what the read showed: a JWKSConfig's RelyingParties condition, set
// when its key was promoted, read KeyNotFetched again (test/jwks/oidc TestPromotionOnProof
// failed in CI for it). A writer that changes the object between the read of the stored
// conditions and the patch makes the patch conflict, and it is sent again onto that.
func TestAStaleReadKeepsConditionsWrittenSince(t *testing.T) {
	ns := namespace(t)
	key := client.ObjectKeyFromObject(newConfig(t, ns, "stale"))
	relyingParties := func(reason string) func(*jwksv1alpha1.JWKSConfig) {
		return func(cfg *jwksv1alpha1.JWKSConfig) {
			s := metav1.ConditionFalse
			if reason == jwksv1alpha1.ReasonRelyingPartiesHoldKey {
				s = metav1.ConditionTrue
			}
			Set(cfg, jwksv1alpha1.ConditionRelyingParties, s, reason, "says "+reason)
		}
	}
	reconcile := func(c client.Client, cfg *jwksv1alpha1.JWKSConfig, change func(*jwksv1alpha1.JWKSConfig)) {
		t.Helper()
		p := NewPatcher(cfg)
		change(cfg)
		if err := p.Patch(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	reconcile(env.Client, getConfig(t, key), func(cfg *jwksv1alpha1.JWKSConfig) {
		MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
		relyingParties(jwksv1alpha1.ReasonKeyNotFetched)(cfg)
	})
	stale := getConfig(t, key)
	reconcile(env.Client, getConfig(t, key), relyingParties(jwksv1alpha1.ReasonRelyingPartiesHoldKey))

	reconcile(env.Client, stale, func(cfg *jwksv1alpha1.JWKSConfig) {
		MarkPending(cfg, jwksv1alpha1.ReasonUpdateThrottled, "throttled")
	})
	stored := getConfig(t, key)
	if c := meta.FindStatusCondition(stored.Status.Conditions, jwksv1alpha1.ConditionRelyingParties); c == nil || c.Reason != jwksv1alpha1.ReasonRelyingPartiesHoldKey {
		t.Errorf("after a reconcile of a stale read: RelyingParties %+v, want %s as written since the read", c, jwksv1alpha1.ReasonRelyingPartiesHoldKey)
	}
	if c := meta.FindStatusCondition(stored.Status.Conditions, conditions.Reconciling); c == nil || c.Reason != jwksv1alpha1.ReasonUpdateThrottled {
		t.Errorf("after a reconcile of a stale read: Reconciling %+v, want the %s it set", c, jwksv1alpha1.ReasonUpdateThrottled)
	}

	// A condition the stale reconcile removed goes; one it changed replaces the stored one.
	stale = getConfig(t, key)
	reconcile(env.Client, getConfig(t, key), func(cfg *jwksv1alpha1.JWKSConfig) { cfg.Status.KeyCount = 3 })
	reconcile(env.Client, stale, func(cfg *jwksv1alpha1.JWKSConfig) {
		meta.RemoveStatusCondition(&cfg.Status.Conditions, conditions.Reconciling)
		relyingParties(jwksv1alpha1.ReasonRelyingPartyUnreadable)(cfg)
	})
	stored = getConfig(t, key)
	if meta.FindStatusCondition(stored.Status.Conditions, conditions.Reconciling) != nil ||
		meta.FindStatusCondition(stored.Status.Conditions, jwksv1alpha1.ConditionRelyingParties).Reason != jwksv1alpha1.ReasonRelyingPartyUnreadable ||
		!meta.IsStatusConditionTrue(stored.Status.Conditions, conditions.Ready) || stored.Status.KeyCount != 3 {
		t.Errorf("after removing Reconciling and changing RelyingParties: %+v", stored.Status)
	}

	// Another writer between the read of the stored conditions and the patch: a conflict,
	// and the patch is made again onto what that writer wrote.
	var interleaved atomic.Bool
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	racing := interceptor.NewClient(base, interceptor.Funcs{
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
			if err := c.SubResource(sub).Get(ctx, obj, subResource, opts...); err != nil {
				return err
			}
			if interleaved.CompareAndSwap(false, true) {
				other := getConfig(t, key)
				Set(other, "Other", metav1.ConditionTrue, "Elsewhere", "another writer")
				if err := env.Client.Status().Update(ctx, other); err != nil {
					t.Error(err)
				}
			}
			return nil
		},
	})
	stale = getConfig(t, key)
	stale.ResourceVersion = "1" // as a cache far behind would hold it
	reconcile(racing, stale, relyingParties(jwksv1alpha1.ReasonRelyingPartiesHoldKey))
	stored = getConfig(t, key)
	if meta.FindStatusCondition(stored.Status.Conditions, "Other") == nil ||
		meta.FindStatusCondition(stored.Status.Conditions, jwksv1alpha1.ConditionRelyingParties).Reason != jwksv1alpha1.ReasonRelyingPartiesHoldKey {
		t.Errorf("after a write that raced the patch: %+v, want the other writer's condition and RelyingParties %s", stored.Status.Conditions, jwksv1alpha1.ReasonRelyingPartiesHoldKey)
	}
}
