package jwks

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

func TestEarliestResult(t *testing.T) {
	after := func(d time.Duration) ctrl.Result { return ctrl.Result{RequeueAfter: d} }
	for _, tc := range []struct {
		a, b, want ctrl.Result
	}{
		{ctrl.Result{}, ctrl.Result{}, ctrl.Result{}},
		{ctrl.Result{}, after(time.Minute), after(time.Minute)},
		{after(time.Minute), ctrl.Result{}, after(time.Minute)},
		{after(time.Minute), after(time.Second), after(time.Second)},
		{after(time.Second), after(time.Minute), after(time.Second)},
	} {
		if got := earliest(tc.a, tc.b); got != tc.want {
			t.Errorf("earliest(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNextWakeUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                  string
		nextRemoval, notAfter time.Time
		want                  time.Duration
	}{
		{"at expiry without a removal", time.Time{}, now.Add(time.Hour), time.Hour + time.Second},
		{"a removal before expiry", now.Add(time.Minute), now.Add(time.Hour), time.Minute},
		{"expiry before the removal", now.Add(2 * time.Hour), now.Add(time.Hour), time.Hour + time.Second},
		{"overdue: a second", now.Add(-time.Minute), now.Add(time.Hour), time.Second},
		{"expired: a second", time.Time{}, now.Add(-time.Hour), time.Second},
	} {
		if got := nextWakeUp(now, tc.nextRemoval, tc.notAfter); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSigningPolicy(t *testing.T) {
	for _, tc := range []struct {
		name             string
		secret           string
		strategy         jwksv1alpha1.UpdateStrategy
		current, signing string
		keep             string
		atOnce           bool
	}{
		{name: "no signing Secret", current: "new", signing: ""},
		{name: "the current key signs", secret: "sign", current: "new", signing: "new"},
		{name: "the first key", secret: "sign", current: "new", signing: "", atOnce: true},
		{name: "a new key waits, the old one is kept", secret: "sign", current: "new", signing: "old", keep: "old"},
		{name: "immediate", secret: "sign", strategy: jwksv1alpha1.UpdateStrategyImmediate, current: "new", signing: "old", atOnce: true},
	} {
		cfg := &jwksv1alpha1.JWKSConfig{Spec: jwksv1alpha1.JWKSConfigSpec{SigningSecret: tc.secret, UpdateStrategy: tc.strategy}}
		keep, atOnce := signingPolicy(cfg, tc.current, tc.signing)
		if keep != tc.keep || atOnce != tc.atOnce {
			t.Errorf("%s: keep %q at once %v, want %q %v", tc.name, keep, atOnce, tc.keep, tc.atOnce)
		}
	}
}
