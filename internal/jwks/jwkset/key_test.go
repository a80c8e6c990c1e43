package jwkset

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	jwxjwa "github.com/lestrrat-go/jwx/v3/jwa"
	jwxjwk "github.com/lestrrat-go/jwx/v3/jwk"
	jwxjwt "github.com/lestrrat-go/jwx/v3/jwt"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func newChain(t testing.TB, kt testcerts.KeyType) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := testcerts.NewChain(key, "issuer.example", now.Add(-time.Hour), now.Add(90*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeyTypesProduceCorrectJWKs checks every member of the published JWK against its
// definition, and that a JWT signed with tls.key verifies against the published set
// using an independent JOSE implementation (lestrrat-go/jwx).
func TestKeyTypesProduceCorrectJWKs(t *testing.T) {
	for _, tc := range []struct {
		kt            testcerts.KeyType
		kty, crv, alg string
		coordLen      int
		jwxAlg        jwxjwa.SignatureAlgorithm
	}{
		{kt: testcerts.RSA2048, kty: "RSA", alg: "RS256", jwxAlg: jwxjwa.RS256()},
		{kt: testcerts.RSA3072, kty: "RSA", alg: "RS256", jwxAlg: jwxjwa.RS256()},
		{kt: testcerts.RSA4096, kty: "RSA", alg: "RS256", jwxAlg: jwxjwa.RS256()},
		{kt: testcerts.P256, kty: "EC", crv: "P-256", alg: "ES256", coordLen: 32, jwxAlg: jwxjwa.ES256()},
		{kt: testcerts.P384, kty: "EC", crv: "P-384", alg: "ES384", coordLen: 48, jwxAlg: jwxjwa.ES384()},
		{kt: testcerts.P521, kty: "EC", crv: "P-521", alg: "ES512", coordLen: 66, jwxAlg: jwxjwa.ES512()},
		{kt: testcerts.Ed25519, kty: "OKP", crv: "Ed25519", alg: "EdDSA", coordLen: 32, jwxAlg: jwxjwa.EdDSA()},
	} {
		t.Run(string(tc.kt), func(t *testing.T) {
			t.Parallel()
			chain := newChain(t, tc.kt)
			key, err := ParseChain(chain.PEM(), "", now)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Marshal([]PublishedKey{{Key: key}})
			if err != nil {
				t.Fatal(err)
			}
			var set struct{ Keys []map[string]any }
			if err := json.Unmarshal(doc, &set); err != nil || len(set.Keys) != 1 {
				t.Fatalf("document %s: %v", doc, err)
			}
			m := set.Keys[0]
			want := map[string]any{"kty": tc.kty, "alg": tc.alg, "use": "sig"}
			if tc.crv != "" {
				want["crv"] = tc.crv
			}
			for k, v := range want {
				if m[k] != v {
					t.Errorf("%s = %v, want %v", k, m[k], v)
				}
			}
			if _, ok := m["key_ops"]; ok {
				t.Error("key_ops published together with use")
			}
			if got, want := m["kid"], rfc7638Thumbprint(t, m); got != want {
				t.Errorf("kid = %v, want RFC 7638 thumbprint %s", got, want)
			}
			x5c, _ := m["x5c"].([]any)
			wantX5c := []any{base64.StdEncoding.EncodeToString(chain.Leaf.Raw), base64.StdEncoding.EncodeToString(chain.CA.Raw)}
			if fmt.Sprint(x5c) != fmt.Sprint(wantX5c) {
				t.Errorf("x5c is not the full chain, leaf first, standard base64")
			}
			s1, s256 := sha1.Sum(chain.Leaf.Raw), sha256.Sum256(chain.Leaf.Raw)
			if m["x5t"] != base64.RawURLEncoding.EncodeToString(s1[:]) {
				t.Errorf("x5t = %v", m["x5t"])
			}
			if m["x5t#S256"] != base64.RawURLEncoding.EncodeToString(s256[:]) {
				t.Errorf("x5t#S256 = %v", m["x5t#S256"])
			}
			for _, coord := range []string{"x", "y"} {
				if s, ok := m[coord].(string); ok && tc.coordLen > 0 {
					if raw, _ := base64.RawURLEncoding.DecodeString(s); len(raw) != tc.coordLen {
						t.Errorf("%s has %d bytes, want %d (padded to the curve size)", coord, len(raw), tc.coordLen)
					}
				}
			}
			if n, ok := m["n"].(string); ok {
				raw, _ := base64.RawURLEncoding.DecodeString(n)
				if raw[0] == 0 {
					t.Error("n has a leading zero byte")
				}
			}
			if !key.NotAfter.Equal(chain.Leaf.NotAfter) {
				t.Errorf("NotAfter = %v", key.NotAfter)
			}
			verifyJWTWithIndependentLibrary(t, doc, chain.LeafKey, tc.jwxAlg, key.KeyID())
		})
	}
}

// rfc7638Thumbprint computes the thumbprint from the published members, independently of
// go-jose: SHA-256 over the required members in lexicographic order, no whitespace.
func rfc7638Thumbprint(t *testing.T, m map[string]any) string {
	t.Helper()
	var canonical string
	switch m["kty"] {
	case "RSA":
		canonical = fmt.Sprintf(`{"e":%q,"kty":"RSA","n":%q}`, m["e"], m["n"])
	case "EC":
		canonical = fmt.Sprintf(`{"crv":%q,"kty":"EC","x":%q,"y":%q}`, m["crv"], m["x"], m["y"])
	case "OKP":
		canonical = fmt.Sprintf(`{"crv":%q,"kty":"OKP","x":%q}`, m["crv"], m["x"])
	default:
		t.Fatalf("kty %v", m["kty"])
	}
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func verifyJWTWithIndependentLibrary(t *testing.T, doc []byte, signer crypto.Signer, alg jwxjwa.SignatureAlgorithm, kid string) {
	t.Helper()
	priv, err := jwxjwk.Import(rawPrivate(signer))
	if err != nil {
		t.Fatal(err)
	}
	if err := priv.Set(jwxjwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	tok, err := jwxjwt.NewBuilder().Issuer("https://issuer.example").Subject("alice").Expiration(time.Now().Add(time.Hour)).Build()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := jwxjwt.Sign(tok, jwxjwt.WithKey(alg, priv))
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwxjwk.Parse(doc)
	if err != nil {
		t.Fatalf("independent library cannot parse the set: %v", err)
	}
	parsed, err := jwxjwt.Parse(signed, jwxjwt.WithKeySet(set))
	if err != nil {
		t.Fatalf("JWT signed with tls.key does not verify against the published set: %v", err)
	}
	if sub, _ := parsed.Subject(); sub != "alice" {
		t.Errorf("subject = %q", sub)
	}
}

func rawPrivate(s crypto.Signer) any {
	switch k := s.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey:
		return k
	case ed25519.PrivateKey:
		return k
	}
	return s
}

func TestBadInputIsAPreciseInputError(t *testing.T) {
	expired := func() []byte {
		key, _ := testcerts.NewKey(testcerts.P256)
		c, err := testcerts.NewChain(key, "old", now.Add(-48*time.Hour), now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return c.PEM()
	}
	weak := newChain(t, testcerts.RSA1024)
	p256 := newChain(t, testcerts.P256)
	for _, tc := range []struct {
		name, reason, msg string
		pem               []byte
		alg               string
	}{
		{name: "empty", pem: []byte(" \n"), reason: jwksv1alpha1.ReasonMissingCertificate, msg: "tls.crt is empty"},
		{name: "garbage", pem: []byte("not a certificate at all"), reason: jwksv1alpha1.ReasonInvalidPEM, msg: "no PEM block"},
		{name: "private key block", pem: p256.KeyPEM(), reason: jwksv1alpha1.ReasonNotACertificate, msg: `"PRIVATE KEY" PEM block`},
		{name: "corrupt DER", pem: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), reason: jwksv1alpha1.ReasonInvalidCertificate, msg: "certificate 1"},
		{name: "DSA", pem: readTestdata(t, "dsa.crt"), reason: jwksv1alpha1.ReasonUnsupportedKey, msg: "DSA is not supported"},
		{name: "Ed448", pem: readTestdata(t, "ed448.crt"), reason: jwksv1alpha1.ReasonUnsupportedKey, msg: "Ed448 is not supported"},
		{name: "RSA 1024", pem: weak.PEM(), reason: jwksv1alpha1.ReasonWeakKey, msg: "RSA key has 1024 bits, at least 2048"},
		{name: "expired", pem: expired(), reason: jwksv1alpha1.ReasonCertificateExpired, msg: `certificate "CN=old" expired at`},
		{name: "algorithm mismatch", pem: p256.PEM(), alg: "RS256", reason: jwksv1alpha1.ReasonInvalidAlgorithm, msg: "RS256 does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseChain(tc.pem, tc.alg, now)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *InputError", err)
			}
			if ie.Reason != tc.reason {
				t.Errorf("reason = %s, want %s", ie.Reason, tc.reason)
			}
			if !strings.Contains(ie.Message, tc.msg) {
				t.Errorf("message = %q, want it to contain %q", ie.Message, tc.msg)
			}
		})
	}
}

func TestAlgorithmOverride(t *testing.T) {
	key, err := ParseChain(newChain(t, testcerts.RSA2048).PEM(), "PS384", now)
	if err != nil {
		t.Fatal(err)
	}
	if key.JWK.Algorithm != "PS384" {
		t.Errorf("alg = %s", key.JWK.Algorithm)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
