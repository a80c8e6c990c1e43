package jwkshttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// expectedDoc is the published document of a new key of its own, and its kid.
func expectedDoc(t testing.TB) (string, []byte) {
	t.Helper()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwkset.ParseChain(chain.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: k}})
	if err != nil {
		t.Fatal(err)
	}
	return k.KeyID(), doc
}

func TestETagMatching(t *testing.T) {
	for header, want := range map[string]bool{`"a"`: true, `"b", "a"`: true, `W/"a"`: true, `*`: true, `"b"`: false, ``: false} {
		if got := etagMatches(header, `"a"`); got != want {
			t.Errorf("If-None-Match %q: %v, want %v", header, got, want)
		}
	}
}

// routedConfig is a JWKSConfig with its own published set, for the routing tests: which
// set answers says which JWKSConfig a request reached.
type routedConfig struct {
	ns, name, issuer string
	created          time.Time
	cacheMaxAge      *jwksv1alpha1.Duration
}

// routingServer is a Server over a fake client that holds configs, each with a set of a
// key of its own, and indexes them as Setup does. Each config claims its issuer in
// order, as the controller would: the first of an issuer holds it. It returns the kid of
// each config. The server's table is filled by handler (Sync), as Start does.
func routingServer(t testing.TB, configs ...routedConfig) (*Server, client.Client, map[string]string) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithIndex(&jwksv1alpha1.JWKSConfig{}, issuerclaim.KeyIndex, issuerclaim.KeyIndexOf).Build()
	kids := map[string]string{}
	for _, rc := range configs {
		kids[rc.ns+"/"+rc.name] = addRoutedConfig(t, c, rc)
	}
	return &Server{Configs: c, ConfigMaps: c, Claims: &issuerclaim.Claims{Namespace: claimsNamespace, Reader: c}}, c, kids
}

// routed fills the server's table from what its readers hold now, and is its handler.
func routed(t *testing.T, s *Server) http.Handler {
	t.Helper()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// claimsNamespace holds the routing tests' issuer claims.
const claimsNamespace = "trustplane-system"

// addRoutedConfig stores a JWKSConfig with a published set, claiming its issuer if free
// and allowed (without bindings or server hosts).
func addRoutedConfig(t testing.TB, c client.Client, rc routedConfig) string {
	t.Helper()
	ctx := context.Background()
	kid, doc := expectedDoc(t)
	cfg := &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: rc.ns, Name: rc.name, CreationTimestamp: metav1.NewTime(rc.created), UID: types.UID(rc.ns + "-" + rc.name)},
		Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls", Issuer: rc.issuer, CacheMaxAge: rc.cacheMaxAge},
		Status:     jwksv1alpha1.JWKSConfigStatus{LastKeyID: kid, Keys: []jwksv1alpha1.PublishedKey{{KeyID: kid}}},
	}
	claims := &issuerclaim.Claims{Namespace: claimsNamespace}
	if key := jwkset.IssuerKeyOf(cfg); key != "" && claims.Refusal(cfg, key) == "" {
		if err := c.Create(ctx, claims.Desired(cfg, key)); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: rc.ns, Name: jwkset.ConfigMapName(cfg), Labels: map[string]string{jwksv1alpha1.OwnerLabel: rc.name}},
		Data:       map[string]string{jwkset.DocumentKey: string(doc)},
	}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	return kid
}

// serve sends one request to the handler; header holds name, value pairs ("Host" sets
// the request's host).
func serve(h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(context.Background(), method, path, nil)
	req.Host = "trustplane.internal:8082" // what a proxy that does not pass Host on sends
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

type discoveryDoc struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// TestServerRoutesByIssuerPath: a path-preserving proxy forwards the issuer's host with
// <issuer path>/jwks.json and <issuer path>/.well-known/openid-configuration, a
// root-mapping one the canonical /<namespace>/<name>/... on any host; both reach the
// JWKSConfig, whose jwks_uri is the issuer's.
func TestServerRoutesByIssuerPath(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _, kids := routingServer(t,
		routedConfig{ns: "default", name: "issuer", issuer: "https://idp.example/default/issuer", created: t0},
		// Its own namespace's path: a two-segment path /<namespace>/<name> is that
		// namespace's canonical route.
		routedConfig{ns: "team", name: "a", issuer: "https://idp.example/team/tenant-a", created: t0},
		routedConfig{ns: "team", name: "slash", issuer: "https://idp.example/slash/", created: t0},
		routedConfig{ns: "team", name: "root", issuer: "https://idp.example", created: t0},
		routedConfig{ns: "team", name: "none", issuer: "", created: t0},
	)
	h := routed(t, s)
	for _, tc := range []struct {
		host, path, config, issuer, jwksURI string
	}{
		// Path-preserving proxy: the issuer's own host and path, in any spelling of the host.
		{"idp.example", "/default/issuer", "default/issuer", "https://idp.example/default/issuer", "https://idp.example/default/issuer/jwks.json"},
		{"IDP.example:443", "/team/tenant-a", "team/a", "https://idp.example/team/tenant-a", "https://idp.example/team/tenant-a/jwks.json"},
		{"idp.example.", "/slash", "team/slash", "https://idp.example/slash/", "https://idp.example/slash/jwks.json"},
		{"idp.example:8443", "", "team/root", "https://idp.example", "https://idp.example/jwks.json"},
		// Root-mapping proxy: the canonical route, whatever the host.
		{"proxy.internal", "/team/a", "team/a", "https://idp.example/team/tenant-a", "https://idp.example/team/tenant-a/jwks.json"},
		{"idp.example", "/team/root", "team/root", "https://idp.example", "https://idp.example/jwks.json"},
	} {
		rec := serve(h, http.MethodGet, tc.path+"/.well-known/openid-configuration", "Host", tc.host)
		var doc discoveryDoc
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != 200 {
			t.Errorf("%s%s discovery: %d %s", tc.host, tc.path, rec.Code, rec.Body)
			continue
		}
		if doc.Issuer != tc.issuer || doc.JWKSURI != tc.jwksURI {
			t.Errorf("%s discovery: issuer %q jwks_uri %q, want %q %q", tc.path, doc.Issuer, doc.JWKSURI, tc.issuer, tc.jwksURI)
		}
		if rec := serve(h, http.MethodGet, tc.path+"/jwks.json", "Host", tc.host); rec.Code != 200 || !strings.Contains(rec.Body.String(), kids[tc.config]) {
			t.Errorf("%s%s/jwks.json: %d, not %s's set: %s", tc.host, tc.path, rec.Code, tc.config, rec.Body)
		}
	}
	for path, want := range map[string]int{
		"/team/none/jwks.json":                             200, // the canonical route needs no issuer
		"/team/none/.well-known/openid-configuration":      404, // but discovery does
		"/nosuch/.well-known/openid-configuration":         404,
		"/team/tenant-a/b/jwks.json":                       404,
		"/team/jwks.json":                                  404,
		"/team/a/jwks.json/x":                              404,
		"/default/issuer/default/issuer/jwks.json":         404, // the doubled jwks_uri of before
		"/.well-known/openid-configuration/jwks.json":      404,
		"/team/tenant-a/.well-known/openid-configuration/": 404,
		"/team/tenant-%61/jwks.json":                       404, // a second spelling of /team/tenant-a
		"/team/%61/jwks.json":                              404,
	} {
		if rec := serve(h, http.MethodGet, path, "Host", "idp.example"); rec.Code != want || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q, want %d with a JSON body", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
	}
}

// TestServerKeepsHTTPSemanticsOnIssuerPaths: ETag/304, Cache-Control, CORS, HEAD and
// OPTIONS are the same on an issuer's own path as on the canonical route.
func TestServerKeepsHTTPSemanticsOnIssuerPaths(t *testing.T) {
	s, _, _ := routingServer(t, routedConfig{ns: "team", name: "a", issuer: "https://idp.example/tenants/team/a", created: time.Now()})
	h := routed(t, s)
	for _, path := range []string{"/tenants/team/a/jwks.json", "/tenants/team/a/.well-known/openid-configuration"} {
		rec := serve(h, http.MethodGet, path, "Host", "idp.example")
		etag := rec.Header().Get("ETag")
		if rec.Code != 200 || etag == "" || rec.Header().Get("Cache-Control") != "public, max-age=300" || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: %d %v", path, rec.Code, rec.Header())
		}
		if rec := serve(h, http.MethodGet, path, "Host", "idp.example", "If-None-Match", etag); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("GET %s with its ETag: %d", path, rec.Code)
		}
		if rec := serve(h, http.MethodHead, path, "Host", "idp.example"); rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "" {
			t.Errorf("HEAD %s: %d, %d bytes", path, rec.Code, rec.Body.Len())
		}
		if rec := serve(h, http.MethodOptions, path); rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS" {
			t.Errorf("OPTIONS %s: %d %v", path, rec.Code, rec.Header())
		}
		if rec := serve(h, http.MethodPost, path); rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d", path, rec.Code)
		}
	}
}

// TestServerDisambiguatesAnIssuerPath: several JWKSConfigs may have one issuer path on
// different hosts; the host the client asked for picks among them (X-Forwarded-Host only
// from a trusted proxy), in its one spelling (no case, port or trailing dot). An issuer
// is served by the JWKSConfig holding its claim only: a later one with the same issuer
// never answers, whatever its age, and a request for a host no issuer names is refused
// rather than guessed.
func TestServerDisambiguatesAnIssuerPath(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, c, kids := routingServer(t,
		routedConfig{ns: "team", name: "idp", issuer: "https://idp.example", created: t0.Add(time.Hour)},
		routedConfig{ns: "other", name: "idp", issuer: "https://other.example:8443/", created: t0.Add(time.Second)},
		// Older, but the issuer was claimed first by team/idp: never served.
		routedConfig{ns: "early", name: "takeover", issuer: "https://IDP.example:443", created: t0},
		// Another port of a claimed issuer is the same issuer.
		routedConfig{ns: "early", name: "port", issuer: "https://other.example:9443", created: t0},
		routedConfig{ns: "b", name: "x", issuer: "https://tie.example/shared", created: t0.Add(time.Minute)},
		routedConfig{ns: "a", name: "y", issuer: "https://tie.example/shared", created: t0},
	)
	s.TrustedProxies = mustParseProxies(t, "192.0.2.0/24") // httptest's peer
	h := routed(t, s)
	for _, tc := range []struct {
		path   string
		header []string
		config string // "": refused
	}{
		{"/jwks.json", []string{"X-Forwarded-Host", "idp.example"}, "team/idp"},
		{"/jwks.json", []string{"Host", "idp.example"}, "team/idp"},
		{"/jwks.json", []string{"Host", "other.example:8443"}, "other/idp"},
		{"/jwks.json", []string{"X-Forwarded-Host", "other.example"}, "other/idp"},
		{"/jwks.json", []string{"X-Forwarded-Host", "other.example, proxy.internal", "Host", "idp.example"}, "other/idp"},
		{"/jwks.json", []string{"X-Forwarded-Host", "OTHER.example.:443"}, "other/idp"},
		{"/jwks.json", []string{"X-Forwarded-Host", "unknown.example"}, ""}, // no issuer on this host
		{"/jwks.json", []string{"X-Forwarded-Host", "bad host"}, ""},
		{"/jwks.json", nil, ""},
		{"/shared/jwks.json", []string{"X-Forwarded-Host", "tie.example"}, "b/x"},
		{"/shared/jwks.json", []string{"X-Forwarded-Host", "elsewhere.example"}, ""},
		{"/early/takeover/jwks.json", nil, ""}, // not even on its canonical route
		{"/early/takeover/.well-known/openid-configuration", nil, ""},
		{"/early/port/jwks.json", nil, ""},
	} {
		rec := serve(h, http.MethodGet, tc.path, tc.header...)
		switch {
		case tc.config == "" && rec.Code != http.StatusNotFound:
			t.Errorf("%s %v: %d %s, want 404", tc.path, tc.header, rec.Code, rec.Body)
		case tc.config != "" && (rec.Code != 200 || !strings.Contains(rec.Body.String(), kids[tc.config])):
			t.Errorf("%s %v: %d, not %s's set", tc.path, tc.header, rec.Code, tc.config)
		}
		if got := rec.Header().Get("Vary"); got != "Host, X-Forwarded-Host" {
			t.Errorf("%s %v: Vary %q", tc.path, tc.header, got)
		}
	}

	// The canonical route reaches a JWKSConfig without an issuer.
	kid := addRoutedConfig(t, c, routedConfig{ns: "team", name: "plain", created: t0})
	if rec := serve(routed(t, s), http.MethodGet, "/team/plain/jwks.json"); !strings.Contains(rec.Body.String(), kid) {
		t.Errorf("the canonical route did not reach team/plain: %d %s", rec.Code, rec.Body)
	}
}

// TestServerNeverServesAnotherTenantsSet is issue 36's three routes, in process: alice's
// keys never answer where bob's relying parties look.
//  1. alice names bob's canonical route as her issuer's path, on bob's host: refused, and
//     bob's route answers bob's set while bob's JWKSConfig is healthy;
//  2. a host that matches no issuer gets a 404 before, with and after bob's JWKSConfig,
//     never alice's set of the same path; only the server's own host names
//     (--jwks-server-hosts) are answered by path alone, when one issuer has the path;
//  3. other spellings of bob's issuer are the same claim (or refused at admission).
func TestServerNeverServesAnotherTenantsSet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, c, kids := routingServer(t,
		routedConfig{ns: "bob", name: "idp", issuer: "https://bob.example/team", created: t0},
		routedConfig{ns: "alice", name: "canonical", issuer: "https://bob.example/bob/idp", created: t0},
		routedConfig{ns: "alice", name: "shared", issuer: "https://alice.example/shared", created: t0},
		routedConfig{ns: "alice", name: "port", issuer: "https://BOB.example.:8443/team/", created: t0},
	)
	s.Claims.ServerHosts = []string{"jwks.internal"}
	h := routed(t, s)
	aliceKids := []string{kids["alice/canonical"], kids["alice/shared"], kids["alice/port"]}
	expect := func(when, host, path, owner string) {
		t.Helper()
		rec := serve(h, http.MethodGet, path, "Host", host)
		for _, kid := range aliceKids {
			if kid != kids[owner] && strings.Contains(rec.Body.String(), kid) {
				t.Errorf("%s: %s%s answered alice's key %s", when, host, path, kid)
			}
		}
		switch {
		case owner == "" && rec.Code != http.StatusNotFound:
			t.Errorf("%s: %s%s: %d, want 404", when, host, path, rec.Code)
		case owner != "" && (rec.Code != 200 || strings.HasSuffix(path, "/jwks.json") && !strings.Contains(rec.Body.String(), kids[owner])):
			t.Errorf("%s: %s%s: %d, not %s's set", when, host, path, rec.Code, owner)
		}
	}
	// 1. The canonical route is a claim.
	expect("bob healthy", "bob.example", "/bob/idp/jwks.json", "bob/idp")
	expect("bob healthy", "bob.example", "/bob/idp/.well-known/openid-configuration", "bob/idp")
	expect("bob healthy", "anything.example", "/bob/idp/jwks.json", "bob/idp")
	expect("bob healthy", "bob.example", "/alice/canonical/jwks.json", "")
	// 3. Another spelling of bob's issuer is bob's.
	expect("bob healthy", "bob.example:8443", "/team/jwks.json", "bob/idp")
	expect("bob healthy", "bob.example", "/alice/port/jwks.json", "")
	// 2. No host-blind fallback but on the server's own host names.
	expect("before bob's", "bob.example", "/shared/jwks.json", "")
	expect("before bob's", "bob.example", "/shared/.well-known/openid-configuration", "")
	expect("before bob's", "jwks.internal:8082", "/shared/jwks.json", "alice/shared")
	kids["bob/shared"] = addRoutedConfig(t, c, routedConfig{ns: "bob", name: "shared", issuer: "https://bob.example/shared", created: t0})
	h = routed(t, s)
	expect("with bob's", "bob.example", "/shared/jwks.json", "bob/shared")
	expect("with bob's", "alice.example", "/shared/jwks.json", "alice/shared")
	expect("with bob's", "jwks.internal", "/shared/jwks.json", "") // two issuers: never a guess
	if err := c.Delete(context.Background(), &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "bob", Name: "shared"}}); err != nil {
		t.Fatal(err)
	}
	h = routed(t, s)
	expect("after bob's", "bob.example", "/shared/jwks.json", "")
	expect("after bob's", "other.example", "/shared/jwks.json", "")

	// An issuer on the server's own host is never claimed, nor served.
	own := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "alice", Name: "own"}, Spec: jwksv1alpha1.JWKSConfigSpec{Issuer: "https://JWKS.internal/shared"}}
	if why := s.Claims.Refusal(own, jwkset.IssuerKeyOf(own)); !strings.Contains(why, "--jwks-server-hosts") {
		t.Errorf("an issuer on the server's own host: refusal %q", why)
	}
	if why := s.Claims.Refusal(&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "alice"}}, "bob.example/bob/idp"); !strings.Contains(why, `JWKSConfig "idp" in namespace "bob"`) {
		t.Errorf("bob's canonical route as alice's issuer: refusal %q does not name its owner", why)
	}
	for _, key := range []string{"bob.example/alice/x", "bob.example/bob", "bob.example/bob/idp/x", "bob.example"} {
		if why := s.Claims.Refusal(&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "alice"}}, key); why != "" {
			t.Errorf("%s: refused (%s), but it names no other namespace's route", key, why)
		}
	}
}

// TestServerTrustsForwardedHostOnlyFromProxies: bob's issuer is https://idp.example.com/bob;
// alice's https://attacker.example/bob (another host, the same path) with a cacheMaxAge of
// 99999h. A client's own X-Forwarded-Host never reaches alice's set under bob's URL, no
// answer says max-age beyond the operator's maximum, and every answer varies on what
// routed it.
func TestServerTrustsForwardedHostOnlyFromProxies(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _, kids := routingServer(t,
		routedConfig{ns: "bob", name: "idp", issuer: "https://idp.example.com/bob", created: t0},
		routedConfig{ns: "alice", name: "idp", issuer: "https://attacker.example/bob", created: t0, cacheMaxAge: ptr.To(jwksv1alpha1.Duration("99999h"))},
	)
	s.MaxCacheMaxAge = 24 * time.Hour
	h := routed(t, s)
	rec := serve(h, http.MethodGet, "/bob/jwks.json", "Host", "idp.example.com", "X-Forwarded-Host", "attacker.example")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), kids["bob/idp"]) {
		t.Fatalf("untrusted X-Forwarded-Host: %d %s, want bob's set", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Vary"); got != "Host" {
		t.Errorf("Vary %q, want Host", got)
	}

	s.TrustedProxies = mustParseProxies(t, "192.0.2.1")
	rec = serve(h, http.MethodGet, "/bob/jwks.json", "Host", "trustplane.internal", "X-Forwarded-Host", "attacker.example")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), kids["alice/idp"]) {
		t.Fatalf("trusted X-Forwarded-Host: %d %s, want alice's set (her own issuer)", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Cache-Control"); got != "public, max-age=86400" {
		t.Errorf("Cache-Control %q, want the operator's maximum", got)
	}
	if got := rec.Header().Get("Vary"); got != "Host, X-Forwarded-Host" {
		t.Errorf("Vary %q", got)
	}
}

// BenchmarkServerRequest is the cost of one request, by the size of the tenant's objects:
// the route table holds the document, so it does not grow with the JWKSConfig's size.
func BenchmarkServerRequest(b *testing.B) {
	for _, size := range []int{0, 1 << 20} {
		b.Run(fmt.Sprintf("annotations=%dB", size), func(b *testing.B) {
			s, c, _ := routingServer(b, routedConfig{ns: "bob", name: "idp", issuer: "https://bob.example/x"})
			cfg := &jwksv1alpha1.JWKSConfig{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "bob", Name: "idp"}, cfg); err != nil {
				b.Fatal(err)
			}
			cfg.Annotations = map[string]string{"filler": strings.Repeat("x", size)}
			if err := c.Update(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			if err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			h := s.Handler()
			b.ReportAllocs()
			for b.Loop() {
				if rec := serve(h, http.MethodGet, "/x/jwks.json", "Host", "bob.example"); rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

func mustParseProxies(t *testing.T, cidrs ...string) []netip.Prefix {
	t.Helper()
	p, err := ParseTrustedProxies(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
