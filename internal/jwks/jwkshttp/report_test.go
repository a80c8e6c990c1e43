package jwkshttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// TestServerReportsTheKeysWaitingToSignItAnswers: the server's Lease names, for each
// JWKSConfig whose status has a key waiting to sign, that key once the server answers a set
// holding it, with the time it first did (kept while the key stays in the set); a key it
// does not answer is not named.
func TestServerReportsTheKeysWaitingToSignItAnswers(t *testing.T) {
	ctx := context.Background()
	s, c, kids := routingServer(t, routedConfig{ns: "a", name: "served"}, routedConfig{ns: "b", name: "lagging"})
	setPending := func(ns, name, kid string) {
		t.Helper()
		cfg := &jwksv1alpha1.JWKSConfig{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Status.PendingKeyID = kid
		if err := c.Update(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	setPending("a", "served", kids["a/served"])
	setPending("b", "lagging", "a-key-not-in-its-set")
	s.Reports, s.ReportNamespace = c, claimsNamespace
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if err := s.register(ctx); err != nil {
		t.Fatal(err)
	}
	read := func() ServerReport {
		t.Helper()
		leases := &coordinationv1.LeaseList{}
		if err := c.List(ctx, leases, client.InNamespace(claimsNamespace), client.HasLabels{jwksv1alpha1.ServerLabel}); err != nil || len(leases.Items) != 1 {
			t.Fatalf("want the server's one Lease, got %v (%v)", leases.Items, err)
		}
		return ReportOf(&leases.Items[0])
	}
	r := read()
	if got := r.Serving["a/served"]; got.KeyID != kids["a/served"] || got.Since.Before(first.Add(-time.Second)) {
		t.Errorf("report for a/served: %+v, want kid %s since about %v", got, kids["a/served"], first)
	}
	if got, ok := r.Serving["b/lagging"]; ok {
		t.Errorf("reported a key its set does not hold: %+v", got)
	}
	if until := r.Until.Sub(first); until < ReportDuration-time.Second || until > ReportDuration+time.Second {
		t.Errorf("report runs out %v after it was written, want %v", until, ReportDuration)
	}
	// Refreshed (the same set), renewed: the time it first answered the key stays.
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.report(ctx); err != nil {
		t.Fatal(err)
	}
	if again := read().Serving["a/served"]; !again.Since.Equal(r.Serving["a/served"].Since) {
		t.Errorf("renewed report moved the first answer from %v to %v", r.Serving["a/served"].Since, again.Since)
	}
}

// TestServerStopsAnsweringWhenItsReportRunsOut: from ReportInterval before its report runs
// out, the server answers 503 and is not ready: the controller no longer waits for it
// then, so it must answer no set it may not have read.
func TestServerStopsAnsweringWhenItsReportRunsOut(t *testing.T) {
	s, c, _ := routingServer(t, routedConfig{ns: "a", name: "one"})
	s.Reports, s.ReportNamespace = c, claimsNamespace
	h := routed(t, s)
	if err := s.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := serve(h, http.MethodGet, "/a/one/jwks.json"); rec.Code != http.StatusOK {
		t.Fatalf("answered %d while its report holds, want 200", rec.Code)
	}
	s.answerUntil.Store(time.Now().Add(-time.Millisecond).UnixNano()) // not renewed since
	if rec := serve(h, http.MethodGet, "/a/one/jwks.json"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("answered %d once its report ran out, want 503", rec.Code)
	}
	s.serving.Store(true)
	if err := s.Ready(nil); err == nil {
		t.Error("ready once its report ran out")
	}
}
