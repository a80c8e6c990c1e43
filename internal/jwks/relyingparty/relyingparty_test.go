package relyingparty

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const issuer = "https://idp.example/tenants/a"

// exposition is /metrics as kube-apiserver v1.37.1 writes it: two issuers, this one
// fetched last at 1764500000.5 with the set doc, the other never fetched successfully.
func exposition(doc string) string {
	other := Hash([]byte("https://other.example"))
	id := Hash([]byte("apiserver-7c1d"))
	return fmt.Sprintf(`# HELP apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info [ALPHA] Information about the last JWKS fetched by the JWT authenticator with hash as label, split by api server identity and jwt issuer.
# TYPE apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info gauge
apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info{apiserver_id_hash=%[1]q,hash=%[2]q,jwt_issuer_hash=%[3]q} 1
# HELP apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds [ALPHA] Timestamp of the last successful or failed JWKS fetch split by result, api server identity and jwt issuer for the JWT authenticator.
# TYPE apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds gauge
apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds{apiserver_id_hash=%[1]q,jwt_issuer_hash=%[3]q,result="success"} 1.7645000005e+09
apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds{apiserver_id_hash=%[1]q,jwt_issuer_hash=%[3]q,result="failure"} 1.7644e+09
apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds{apiserver_id_hash=%[1]q,jwt_issuer_hash=%[4]q,result="failure"} 1.7645e+09
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 12
`, id, Hash([]byte(doc)), Hash([]byte(issuer)), other)
}

func TestParse(t *testing.T) {
	doc := `{"keys":[]}`
	fetches, err := Parse(strings.NewReader(exposition(doc)), issuer)
	if err != nil {
		t.Fatal(err)
	}
	want := Fetch{
		APIServerIDHash: Hash([]byte("apiserver-7c1d")),
		KeySetHash:      Hash([]byte(doc)),
		LastSuccess:     time.UnixMilli(1764500000500).UTC(),
		LastFailure:     time.Unix(1764400000, 0).UTC(),
	}
	if len(fetches) != 1 || fetches[0] != want {
		t.Fatalf("Parse = %+v, want [%+v]", fetches, want)
	}
	if !Holds(fetches, []string{"sha256:other", Hash([]byte(doc))}) {
		t.Error("Holds: false for a document it fetched")
	}
	if Holds(fetches, []string{Hash([]byte(`{"keys":[{}]}`))}) {
		t.Error("Holds: true for a document it did not fetch")
	}
	other, err := Parse(strings.NewReader(exposition(doc)), "https://other.example")
	if err != nil || len(other) != 1 || other[0].KeySetHash != "" || Holds(other, []string{""}) {
		t.Errorf("an issuer never fetched: %+v %v", other, err)
	}
	none, err := Parse(strings.NewReader(exposition(doc)), "https://unknown.example")
	if err != nil || len(none) != 0 || Holds(none, []string{Hash([]byte(doc))}) {
		t.Errorf("an issuer not configured: %+v %v", none, err)
	}
	if _, err := Parse(strings.NewReader("<html>hello</html>\n"), issuer); err == nil {
		t.Error("Parse accepted HTML")
	}
}

// TestScrapeAndProbe: over verified TLS with the bearer token; a wrong CA, a 403 and
// garbage are each an Error with its reason, and the probe is a token go-oidc's checks
// before the key lookup pass, naming the pending kid, that the set's key cannot verify.
func TestScrapeAndProbe(t *testing.T) {
	var probe string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch auth := r.Header.Get("Authorization"); {
		case auth == "Bearer metrics-reader" && r.URL.Path == "/metrics":
			fmt.Fprint(w, exposition("doc"))
		case auth == "Bearer metrics-reader" && r.URL.Path == "/garbage":
			fmt.Fprint(w, "<html>{not metrics\n")
		case auth == "Bearer stranger":
			w.WriteHeader(http.StatusForbidden)
		default:
			probe = strings.TrimPrefix(auth, "Bearer ")
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ca := pemOf(srv.Certificate().Raw)
	c := Client{Timeout: 5 * time.Second}
	ctx := context.Background()

	fetches, err := c.Scrape(ctx, Endpoint{MetricsURL: srv.URL + "/metrics", CAPEM: ca, Token: "metrics-reader"}, issuer)
	if err != nil || !Holds(fetches, []string{Hash([]byte("doc"))}) {
		t.Fatalf("Scrape = %+v, %v", fetches, err)
	}
	for name, tc := range map[string]struct {
		ep     Endpoint
		reason string
		says   string
	}{
		"no CA":     {Endpoint{MetricsURL: srv.URL + "/metrics", Token: "metrics-reader"}, "Unreachable", "certificate"},
		"a 403":     {Endpoint{MetricsURL: srv.URL + "/metrics", CAPEM: ca, Token: "stranger"}, "Refused", "may not get /metrics"},
		"a 401":     {Endpoint{MetricsURL: srv.URL + "/metrics", CAPEM: ca}, "Refused", "401"},
		"garbage":   {Endpoint{MetricsURL: srv.URL + "/garbage", CAPEM: ca, Token: "metrics-reader"}, "Unparsable", "not Prometheus metrics"},
		"a bad PEM": {Endpoint{MetricsURL: srv.URL + "/metrics", CAPEM: []byte("nope"), Token: "metrics-reader"}, "Unreachable", "no PEM certificate"},
	} {
		_, err := c.Scrape(ctx, tc.ep, issuer)
		var rpErr *Error
		if !errors.As(err, &rpErr) || rpErr.Reason != tc.reason || !strings.Contains(rpErr.Message, tc.says) || !strings.Contains(rpErr.Message, tc.ep.MetricsURL) {
			t.Errorf("%s: %v, want %s saying %q and naming the URL", name, err, tc.reason, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "<html>") {
			t.Errorf("%s: the answer's body is in the message: %v", name, err)
		}
	}

	now := time.Now()
	token, err := ProbeToken(issuer, "relying-party", "pending-kid", "ES256", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Probe(ctx, Endpoint{MetricsURL: srv.URL + "/metrics", CAPEM: ca}, token); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if probe != token {
		t.Fatal("the probe did not present its token")
	}
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if h := parsed.Headers[0]; h.KeyID != "pending-kid" || h.Algorithm != "ES256" {
		t.Errorf("probe header %+v", h)
	}
	var claims jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{"relying-party"}, Time: now}, 0); err != nil {
		t.Errorf("the probe fails go-oidc's checks before the key lookup: %v", err)
	}
	// Signed by a throwaway key: another key of the same kind never verifies it.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.Claims(&other.PublicKey, &claims); err == nil {
		t.Error("the probe verifies with a key that is not its own")
	}
	if _, err := ProbeToken(issuer, "a", "k", "EdDSA", now); err == nil {
		t.Error("a probe for EdDSA, which kube-apiserver does not accept")
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
