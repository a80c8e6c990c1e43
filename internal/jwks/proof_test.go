package jwks

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/relyingparty"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// fakeAPIServer stands in for kube-apiserver's /metrics, to inject what a real one cannot
// be made to answer: it reports, for issuer, the last fetched set's hash *reported, and
// answers 401 to the probe (any other token). test/jwks/oidc proves the same against
// kube-apiserver itself.
func fakeAPIServer(t *testing.T, issuer string, reported *string, body func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer metrics-reader":
			if body != nil {
				fmt.Fprint(w, body())
				return
			}
			fmt.Fprintf(w, "apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info{apiserver_id_hash=\"sha256:1\",hash=%q,jwt_issuer_hash=%q} 1\n",
				*reported, relyingparty.Hash([]byte(issuer)))
		case "Bearer forbidden":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPromotionWaitsForProofOrTimer: proven is true only when every relying party reports
// a set published with the pending key. A hash no published document has, garbage, a
// wrong CA, a 403, a missing credentials Secret or a host the operator does not allow
// each leave it false, with the RelyingParties condition and a Warning event naming the
// relying party and why: promotion then waits for its timer, never less.
func TestPromotionWaitsForProofOrTimer(t *testing.T) {
	ns := newNamespace(t)
	const issuer = "https://idp.example"
	doc := []byte(`{"keys":[{"kid":"new"}]}`)
	reported := relyingparty.Hash(doc)
	good := fakeAPIServer(t, issuer, &reported, nil)
	garbage := fakeAPIServer(t, issuer, &reported, func() string { return "<html>{oops\n" })
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: good.Certificate().Raw})
	otherCA := testcerts.CertPEM(newChain(t, testcerts.P256).CA)
	putSecret(t, ns, "reader", map[string][]byte{"token": []byte("metrics-reader"), "ca.crt": caPEM})
	putSecret(t, ns, "wrong-ca", map[string][]byte{"token": []byte("metrics-reader"), "ca.crt": otherCA})
	putSecret(t, ns, "forbidden", map[string][]byte{"token": []byte("forbidden"), "ca.crt": caPEM})

	rp := func(name, url, secret string) jwksv1alpha1.RelyingParty {
		return jwksv1alpha1.RelyingParty{Name: name, MetricsURL: url + "/metrics", CredentialsSecretName: secret, Audience: "rp"}
	}
	for _, tc := range []struct {
		name     string
		parties  []jwksv1alpha1.RelyingParty
		hosts    []string
		reported string
		proven   bool
		reason   string
		says     string
	}{
		{"one holds the key", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "reader")}, nil, reported, true, jwksv1alpha1.ReasonRelyingPartiesHoldKey, "key new"},
		{"a hash no published document has", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "reader")}, nil, relyingparty.Hash([]byte(`{"keys":[]}`)), false, jwksv1alpha1.ReasonKeyNotFetched, "a: the set it last fetched does not hold the pending key yet"},
		{"garbage", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "reader"), rp("b", garbage.URL, "reader")}, nil, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, "b: " + garbage.URL + "/metrics answers what is not Prometheus metrics"},
		{"a wrong CA", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "wrong-ca")}, nil, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, "a: " + good.URL + "/metrics cannot be read: tls: failed to verify certificate"},
		{"a 403", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "forbidden")}, nil, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, "a: " + good.URL + "/metrics answers 403 Forbidden: the token in the credentials Secret may not get /metrics"},
		{"no credentials Secret", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "absent")}, nil, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, `a: its credentials Secret "absent" does not exist`},
		{"a host not allowed", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "reader")}, []string{"*.apiserver.example"}, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, "a: host 127.0.0.1 is not allowed: the operator allows *.apiserver.example (--jwks-relying-party-hosts)"},
		{"no host allowed", []jwksv1alpha1.RelyingParty{rp("a", good.URL, "reader")}, []string{}, reported, false, jwksv1alpha1.ReasonRelyingPartyUnreadable, "--jwks-relying-party-hosts is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reported = tc.reported
			recorder := events.NewFakeRecorder(10)
			hosts := tc.hosts
			if hosts == nil {
				hosts = []string{"127.0.0.1"}
			}
			now := time.Now()
			r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(now), Recorder: recorder, APIReader: env.Client,
				RelyingPartyHosts: hosts, ScrapeInterval: time.Second}
			timer := metav1.NewTime(now.Add(time.Minute))
			cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Generation: 1},
				Spec: jwksv1alpha1.JWKSConfigSpec{Issuer: issuer, SigningSecret: "s",
					Promotion: &jwksv1alpha1.PromotionSpec{RelyingParties: tc.parties}},
				Status: jwksv1alpha1.JWKSConfigStatus{PendingKeyID: "new", PendingPromotionTime: &timer}}
			recordDocument(cfg, true, []byte(`{"keys":[{"kid":"old"},{"kid":"new"}]}`))
			recordDocument(cfg, true, doc)
			if got := r.proven(context.Background(), cfg, "new", "ES256"); got != tc.proven {
				t.Errorf("proven = %v, want %v", got, tc.proven)
			}
			c := meta.FindStatusCondition(cfg.Status.Conditions, jwksv1alpha1.ConditionRelyingParties)
			if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) {
				t.Fatalf("condition %+v, want %s saying %q", c, tc.reason, tc.says)
			}
			if !tc.proven && !strings.Contains(c.Message, "until its timer") {
				t.Errorf("the condition does not say the timer still promotes: %q", c.Message)
			}
			warned := len(recorder.Events) > 0
			if unreadable := tc.reason == jwksv1alpha1.ReasonRelyingPartyUnreadable; warned != unreadable {
				t.Errorf("a Warning event: %v, want %v", warned, unreadable)
			}
			if warned {
				if e := <-recorder.Events; !strings.Contains(e, corev1.EventTypeWarning) || !strings.Contains(e, tc.says) {
					t.Errorf("event %q does not name the relying party and why", e)
				}
			}
			for _, st := range cfg.Status.Promotion.RelyingParties {
				if strings.Contains(st.Message, "<html>") || strings.Contains(st.Message, "metrics-reader") {
					t.Errorf("status quotes the answer or the token: %q", st.Message)
				}
			}
		})
	}
}

// TestDocumentHashesFollowThePendingKey: the documents published while a key is pending
// are remembered, newest first and at most maxDocumentHashes; a new pending key, or none,
// forgets them.
func TestDocumentHashesFollowThePendingKey(t *testing.T) {
	cfg := &jwksv1alpha1.JWKSConfig{Spec: jwksv1alpha1.JWKSConfigSpec{Promotion: &jwksv1alpha1.PromotionSpec{}}}
	for i := range 10 {
		recordDocument(cfg, true, fmt.Appendf(nil, "doc %d", i))
		recordDocument(cfg, true, fmt.Appendf(nil, "doc %d", i)) // the same document again
	}
	hashes := cfg.Status.Promotion.DocumentHashes
	if len(hashes) != maxDocumentHashes || hashes[0] != relyingparty.Hash([]byte("doc 9")) || hashes[7] != relyingparty.Hash([]byte("doc 2")) {
		t.Errorf("hashes %v", hashes)
	}
	recordDocument(cfg, false, nil)
	if len(cfg.Status.Promotion.DocumentHashes) != 0 {
		t.Error("no key pending, and hashes kept")
	}
	cfg.Spec.Promotion = nil
	cfg.Status.Conditions = []metav1.Condition{{Type: jwksv1alpha1.ConditionRelyingParties}}
	recordDocument(cfg, true, []byte("doc"))
	if cfg.Status.Promotion != nil || len(cfg.Status.Conditions) != 0 {
		t.Errorf("spec.promotion removed, and status kept: %+v", cfg.Status)
	}
}
