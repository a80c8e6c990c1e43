package cli_test

import (
	"bytes"
	"crypto"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testenv"
)

// withStdin runs the built trustplane with args, stdin fed from in.
func withStdin(t *testing.T, in []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func token(t *testing.T, key crypto.Signer, kid string, claims jwt.Claims) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestJWKSInspect(t *testing.T) {
	chain := newChain(t)
	kid, err := jwkset.KeyIDOf(chain.PEM())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	crt := filepath.Join(dir, "tls.crt")
	combined := filepath.Join(dir, "combined.pem")
	keyOnly := filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{crt: chain.PEM(), combined: append(chain.KeyPEM(), chain.PEM()...), keyOnly: chain.KeyPEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []result{tpRaw(t, "jwks", "inspect", crt), tpRaw(t, "jwks", "inspect", combined), withStdin(t, chain.PEM(), "jwks", "inspect", "-")} {
		out := r.ok(t)
		var set struct {
			Keys []struct {
				Kid, Alg, Kty string
				X5c           []string
			}
		}
		if err := json.Unmarshal([]byte(out), &set); err != nil || len(set.Keys) != 1 {
			t.Fatalf("%v: %v\n%s", r.args, err, out)
		}
		if k := set.Keys[0]; k.Kid != kid || k.Alg != "ES256" || k.Kty != "EC" || len(k.X5c) != 2 {
			t.Errorf("%v: %+v", r.args, k)
		}
		if strings.Contains(out, "PRIVATE") || strings.Contains(out, `"d"`) {
			t.Errorf("%v prints the private key", r.args)
		}
	}
	out := tpRaw(t, "jwks", "inspect", crt, "--algorithm", "ES256").ok(t)
	contains(t, out, `"alg": "ES256"`)
	tpRaw(t, "jwks", "inspect", crt, "--algorithm", "RS256").fails(t, "algorithm RS256 does not fit the certificate's key")
}

func TestJWKSVerify(t *testing.T) {
	ns := env.Namespace(t, "verify")
	chain := newChain(t)
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Issuer: "https://idp.example", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	kid := publishSet(t, cfg, chain)
	now := time.Now()
	claims := jwt.Claims{Issuer: "https://idp.example", Subject: "alice", Audience: jwt.Audience{"api"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	good := token(t, chain.LeafKey, kid, claims)

	out := tp(t, "jwks", "verify", good, "--jwksconfig", "issuer", "-n", ns, "--audience", "api").ok(t)
	contains(t, out, "valid: signed by kid "+kid+" (ES256) of JWKSConfig "+ns+"/issuer; issuer https://idp.example, subject alice, audience api, expires in 59m")
	if strings.Contains(out, good) {
		t.Error("the token is printed")
	}
	// From stdin, so the token stays out of the process list.
	withStdin(t, []byte(good+"\n"), "jwks", "verify", "-", "--jwksconfig", "issuer", "-n", ns, "--kubeconfig", admin(t)).ok(t)

	expired := claims
	expired.Expiry = jwt.NewNumericDate(now.Add(-time.Hour))
	otherIssuer := claims
	otherIssuer.Issuer = "https://evil.example"
	stranger := newChain(t)
	for _, tc := range []struct {
		token, want string
		args        []string
	}{
		{token(t, stranger.LeafKey, "someone-else", claims), "kid someone-else is not in the set (it holds " + kid + " (ES256))", nil},
		{token(t, stranger.LeafKey, kid, claims), "the signature does not verify with key " + kid, nil},
		{token(t, chain.LeafKey, kid, expired), "the token expired at", nil},
		{good, `the token's audience ["api"] does not include "web"`, []string{"--audience", "web"}},
		{token(t, chain.LeafKey, kid, otherIssuer), `the token's issuer is "https://evil.example", not "https://idp.example"`, nil},
		{"not-a-token", "not a JWT: a JWT is three base64url parts separated by '.', this has 1", nil},
	} {
		args := append([]string{"jwks", "verify", tc.token, "--jwksconfig", "issuer", "-n", ns}, tc.args...)
		r := tp(t, args...)
		r.fails(t, "the token does not verify against the set of JWKSConfig "+ns+"/issuer: "+tc.want)
		if len(tc.token) > 20 && strings.Contains(r.stderr, tc.token) {
			t.Error("the token is printed")
		}
	}
	tp(t, "jwks", "verify", good, "--jwksconfig", "nosuch", "-n", ns).fails(t, `jwksconfig "nosuch" not found in namespace "`+ns+`"`)
	tpRaw(t, "jwks", "verify", good).fails(t, "give one of --issuer URL or --jwksconfig NAME")
}

// TestJWKSVerifyIssuer verifies against an issuer's discovery document, served over TLS.
func TestJWKSVerifyIssuer(t *testing.T) {
	chain := newChain(t)
	key, err := jwkset.ParseChain(chain.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	var issuer string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/tenant/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": issuer + "/jwks.json"})
		case "/tenant/jwks.json":
			_, _ = w.Write(doc)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused below
	srv.StartTLS()
	defer srv.Close()
	issuer = srv.URL + "/tenant"
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	claims := jwt.Claims{Issuer: issuer, Subject: "bob", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	out := tpRaw(t, "jwks", "verify", token(t, chain.LeafKey, key.KeyID(), claims), "--issuer", issuer, "--issuer-ca", ca).ok(t)
	contains(t, out, "valid: signed by kid "+key.KeyID()+" (ES256) of "+issuer+"/jwks.json; issuer "+issuer+", subject bob")
	tpRaw(t, "jwks", "verify", token(t, chain.LeafKey, key.KeyID(), claims), "--issuer", srv.URL+"/other", "--issuer-ca", ca).fails(t, "404 Not Found")
	tpRaw(t, "jwks", "verify", token(t, chain.LeafKey, key.KeyID(), claims), "--issuer", issuer).fails(t, "certificate")
}
