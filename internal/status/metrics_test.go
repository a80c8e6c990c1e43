package status

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestConditionGaugesFollowTheOutcome: Finish sets trustplane_object_ready, _reconciling
// and _stalled from the conditions it records, by kind, namespace and name; an object
// finalized (going, no finalizer left) or found gone (Forget) loses its series.
func TestConditionGaugesFollowTheOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, c := range Metrics() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	ns := namespace(t)
	key := client.ObjectKeyFromObject(newConfig(t, ns, "gauges"))
	series := func(metric string) (float64, bool) {
		return testenv.GatheredValue(t, reg, metric, map[string]string{"kind": "JWKSConfig", "namespace": ns, "name": "gauges"})
	}
	want := func(what string, ready, reconciling, stalled float64) {
		t.Helper()
		for metric, v := range map[string]float64{"trustplane_object_ready": ready, "trustplane_object_reconciling": reconciling, "trustplane_object_stalled": stalled} {
			if got, ok := series(metric); !ok || got != v {
				t.Errorf("%s: %s = %v (present %v), want %v", what, metric, got, ok, v)
			}
		}
	}
	reconcileOnce := func(mark func(*jwksv1alpha1.JWKSConfig) error) {
		t.Helper()
		cfg := getConfig(t, key)
		// The error is the outcome's (a retry, a terminal error): the gauges are the point.
		_, _ = NewPatcher(cfg).Finish(ctx, env.Client, nil, ctrl.Result{}, mark(cfg))
	}

	reconcileOnce(func(*jwksv1alpha1.JWKSConfig) error { return Waiting("SecretNotFound", "waiting") })
	want("waiting", 0, 1, 0)
	reconcileOnce(func(cfg *jwksv1alpha1.JWKSConfig) error {
		MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
		return nil
	})
	want("ready", 1, 0, 0)
	reconcileOnce(func(*jwksv1alpha1.JWKSConfig) error {
		return Transient("TransientError", errors.New("connection refused"))
	})
	want("retrying what still holds", 1, 1, 0)
	reconcileOnce(func(*jwksv1alpha1.JWKSConfig) error { return Stalled("InvalidPEM", "tls.crt holds no PEM block") })
	want("stalled", 0, 0, 1)
	reconcileOnce(func(cfg *jwksv1alpha1.JWKSConfig) error {
		MarkNotReady(cfg, "Revoked", "revoked on request")
		return nil
	})
	want("not ready by its own request", 0, 0, 0)

	// The last reconcile of a deleted object: going, its finalizer released.
	cfg := getConfig(t, key)
	cfg.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := NewPatcher(cfg).Finish(ctx, env.Client, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, metric := range []string{"trustplane_object_ready", "trustplane_object_reconciling", "trustplane_object_stalled"} {
		if v, ok := series(metric); ok {
			t.Errorf("after the last reconcile of a deleted object: %s = %v", metric, v)
		}
	}

	// Found gone: Forget.
	reconcileOnce(func(*jwksv1alpha1.JWKSConfig) error { return Waiting("SecretNotFound", "waiting") })
	want("waiting again", 0, 1, 0)
	Forget(&jwksv1alpha1.JWKSConfig{}, key)
	if v, ok := series("trustplane_object_ready"); ok {
		t.Errorf("after Forget: trustplane_object_ready = %v", v)
	}
}
