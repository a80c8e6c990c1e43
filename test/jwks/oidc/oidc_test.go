// Package oidc checks OpenID discovery the way a relying party uses it: go-oidc
// (github.com/coreos/go-oidc/v3) discovers each issuer, checks its issuer, fetches jwks_uri
// and verifies a token signed with the Secret's tls.key, through a real nginx TLS reverse
// proxy in front of trustplane's server (the manager run as a process, built from
// ./cmd/trustplane) and in front of the server block trustplane generates for its nginx
// Deployment. The proxies are laid out as docs/jwks.md ("Discovery behind a proxy") shows.
package oidc

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// audience is the client ID the relying party expects in aud.
const audience = "relying-party"

// signingKey is a TLS Secret's key as a token issuer signs with it.
type signingKey struct {
	key      crypto.Signer
	kid, alg string
	chain    []byte // tls.crt
	secret   string // the Secret's name; "" when not stored
}

// TestGoOIDCThroughAProxy runs go-oidc against every issuer form and both proxy layouts.
func TestGoOIDCThroughAProxy(t *testing.T) {
	server := startManager(t)
	ns := env.Namespace(t, "oidc")
	key, otherKey := newSigningKey(t, ns, "issuer-tls"), newSigningKey(t, ns, "other-tls")
	proxyTLS := testenv.NewProxyTLS(t)
	pathPreserving, rootMapping := testenv.FreeAddr(t), testenv.FreeAddr(t)
	_, port, _ := net.SplitHostPort(pathPreserving)

	issuers := map[string]string{
		// Created first, so without the host the proxy passes on it would win the root.
		"other-root": "https://127.0.0.1:" + port,
		"canonical":  "https://" + pathPreserving + "/" + ns + "/canonical",
		"tenant":     "https://" + pathPreserving + "/tenants/team/a",
		"root":       "https://localhost:" + port,
		"mapped":     "https://" + rootMapping + "/idp",
	}
	for _, name := range []string{"other-root", "canonical", "tenant", "root", "mapped"} {
		secret := key
		if name == "other-root" {
			secret = otherKey
		}
		createJWKSConfig(t, ns, name, secret, issuers[name])
		waitServed(t, server, ns, name, secret.kid)
	}
	testenv.StartNginx(t, proxyTLS.Conf+testenv.PathPreservingProxy(pathPreserving, server)+
		testenv.ProxyServer(rootMapping, fmt.Sprintf(`
    location /idp/ {
        proxy_pass http://%s/%s/mapped/;
    }`, server, ns)))

	// Another tenant tries to have her key answer for those issuers (issue 36): on the
	// canonical route the root-mapping proxy forwards to, on a host no issuer of hers
	// names, and in another spelling of an issuer held. None is served where the relying
	// party looks, so her tokens with iss = those issuers are refused.
	alice := env.Namespace(t, "alice")
	aliceKey := newSigningKey(t, alice, "alice-tls")
	for name, tc := range map[string]struct{ issuer, reason string }{
		// The host the root-mapping proxy sends (proxy_pass's own), and bob's route.
		"route":   {"https://" + server + "/" + ns + "/mapped", jwksv1alpha1.ReasonIssuerNotAllowed},
		"path":    {"https://alice.example/tenants/team/a", jwksv1alpha1.ReasonPublished},
		"spelled": {"https://LOCALHOST.:1/", jwksv1alpha1.ReasonIssuerInUse},
	} {
		createJWKSConfig(t, alice, name, aliceKey, tc.issuer)
		waitReason(t, alice, name, tc.reason)
	}

	for name, issuer := range issuers {
		t.Run(name, func(t *testing.T) {
			want, forger := key, otherKey
			if name == "other-root" {
				want, forger = otherKey, key
			}
			verifyThroughDiscovery(t, proxyTLS.Client, issuer, want, forger, aliceKey)
		})
	}
}

// waitReason waits for the JWKSConfig's Ready reason.
func waitReason(t *testing.T, ns, name, reason string) {
	t.Helper()
	testenv.Eventually(t, ns+"/"+name+" to be "+reason, 30*time.Second, func() bool {
		cfg := &jwksv1alpha1.JWKSConfig{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
			return false
		}
		ready := meta.FindStatusCondition(cfg.Status.Conditions, "Ready")
		return ready != nil && ready.Reason == reason
	})
}

// TestGoOIDCAgainstTheGeneratedNginx puts the server block trustplane generates for its
// nginx Deployment (with an issuer: discovery on) behind the TLS proxy, the issuer at the
// proxy's root, and serves it what the controller publishes: jwks.json and the discovery
// document.
func TestGoOIDCAgainstTheGeneratedNginx(t *testing.T) {
	key := newSigningKey(t, "", "")
	otherKey := newSigningKey(t, "", "")
	proxyTLS := testenv.NewProxyTLS(t)
	proxy, backend := testenv.FreeAddr(t), testenv.FreeAddr(t)
	issuer := "https://" + proxy

	published, err := jwkset.ParseChain(key.chain, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: published}})
	if err != nil {
		t.Fatal(err)
	}
	discovery, err := jwkset.Discovery(issuer, doc)
	if err != nil {
		t.Fatal(err)
	}
	html := t.TempDir()
	for name, content := range map[string][]byte{jwkset.DocumentKey: doc, jwkset.DiscoveryKey: discovery} {
		if err := os.WriteFile(filepath.Join(html, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, portText, _ := net.SplitHostPort(backend)
	port, _ := strconv.Atoi(portText)
	generated := jwkset.NginxServer(port, html, 5*time.Minute, true)
	generated = strings.ReplaceAll(generated, fmt.Sprintf("listen %d;", port), "listen "+backend+";")
	testenv.StartNginx(t, proxyTLS.Conf+generated+testenv.ProxyServer(proxy, fmt.Sprintf(`
    location / {
        proxy_pass http://%s;
    }`, backend)))

	verifyThroughDiscovery(t, proxyTLS.Client, issuer, key, otherKey)
}

// verifyThroughDiscovery is what relying parties do: one with a static jwks_uri
// (<issuer>/jwks.json), and one that discovers the issuer (go-oidc checks the document's
// issuer) and then verifies a token signed with want's key, which fetches jwks_uri. A
// token signed with another key must be refused, and so must one signed by each of
// tenants, another tenant's published key, under its own kid, by both.
func verifyThroughDiscovery(t *testing.T, httpClient *http.Client, issuer string, want, other signingKey, tenants ...signingKey) {
	t.Helper()
	ctx := oidc.ClientContext(context.Background(), httpClient)
	// A relying party configured with a static jwks_uri (no discovery) trusts whatever
	// set that URL answers: another tenant's key there would be accepted for issuer.
	static := oidc.NewVerifier(issuer, oidc.NewRemoteKeySet(ctx, strings.TrimSuffix(issuer, "/")+"/jwks.json"),
		&oidc.Config{ClientID: audience, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256, oidc.ES384, oidc.ES512, oidc.EdDSA}})
	if _, err := static.Verify(ctx, signToken(t, issuer, want)); err != nil {
		t.Errorf("static jwks_uri: a token of %s refused: %v", issuer, err)
	}
	for _, tenant := range tenants {
		if _, err := static.Verify(ctx, signToken(t, issuer, tenant)); err == nil {
			t.Errorf("static jwks_uri: a token another tenant signed (kid %s) was accepted for %s", tenant.kid, issuer)
		}
	}
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("discovery of %s: %v", issuer, err)
	}
	var claims struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&claims); err != nil || claims.JWKSURI != strings.TrimSuffix(issuer, "/")+"/jwks.json" {
		t.Errorf("jwks_uri %q (%v), want the issuer's /jwks.json", claims.JWKSURI, err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: audience})
	token, err := verifier.Verify(ctx, signToken(t, issuer, want))
	if err != nil {
		t.Fatalf("verifying a token of %s: %v", issuer, err)
	}
	if token.Subject != "system:serviceaccount:default:client" || token.Issuer != issuer {
		t.Errorf("verified token: subject %q, issuer %q", token.Subject, token.Issuer)
	}
	// The same claims and kid under a key the set does not hold: the signature decides.
	forged := other
	forged.kid, forged.alg = want.kid, want.alg
	if _, err := verifier.Verify(ctx, signToken(t, issuer, forged)); err == nil {
		t.Error("a token signed with a key that is not published was accepted")
	}
	for _, tenant := range tenants {
		if _, err := verifier.Verify(ctx, signToken(t, issuer, tenant)); err == nil {
			t.Errorf("a token another tenant signed (kid %s) was accepted for %s", tenant.kid, issuer)
		}
	}
}

// signToken signs an ID token for issuer with key, as an issuer holding tls.key does.
func signToken(t *testing.T, issuer string, key signingKey) string {
	t.Helper()
	token, err := testcerts.SignJWT(key.key, key.kid, key.alg, issuer, audience, "system:serviceaccount:default:client")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// startManager runs `trustplane manager` with only the jwks controller, as cluster
// admin (what the manager may do is test/e2e's concern), and returns its server's address.
func startManager(t *testing.T) string {
	t.Helper()
	server, probes := testenv.FreeAddr(t), testenv.FreeAddr(t)
	mgr := testenv.StartProcess(t, testenv.Binary(t), "manager", "--controllers=jwks", "--leader-elect=false",
		"--kubeconfig="+env.AdminKubeconfig(t), "--metrics-bind-address=0",
		"--health-probe-bind-address="+probes, "--jwks-server-bind-address="+server,
		"--jwks-server-trusted-proxies=127.0.0.1/32") // nginx, the proxy in front, forwards the host
	mgr.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
	return server
}

// newSigningKey makes a P-256 key with a certificate; with a namespace and name it stores
// them as a TLS Secret and signs with the tls.key read back from it.
func newSigningKey(t *testing.T, ns, name string) signingKey {
	t.Helper()
	leafKey, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(leafKey, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
	if name != "" {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
		if err := env.Client.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(secret), secret); err != nil {
			t.Fatal(err)
		}
		data = secret.Data
	}
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	published, err := jwkset.ParseChain(data[corev1.TLSCertKey], "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{key: pair.PrivateKey.(crypto.Signer), kid: published.KeyID(), alg: published.JWK.Algorithm, chain: data[corev1.TLSCertKey], secret: name}
}

func createJWKSConfig(t *testing.T, ns, name string, key signingKey, issuer string) {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: jwksv1alpha1.JWKSConfigSpec{
			CertificateSecret: key.secret,
			Issuer:            issuer,
			Nginx:             jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)},
		},
	}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// waitServed waits until trustplane's server serves the JWKSConfig's set with kid, on
// its canonical route: the tests then ask once, through the proxy, and expect an answer.
func waitServed(t *testing.T, server, ns, name, kid string) {
	t.Helper()
	url := "http://" + server + "/" + ns + "/" + name + "/jwks.json"
	testenv.Eventually(t, url+" to serve kid "+kid, 30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var set struct{ Keys []struct{ Kid string } }
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&set) == nil && len(set.Keys) == 1 && set.Keys[0].Kid == kid
	})
}

func mustKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
