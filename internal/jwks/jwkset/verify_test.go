package jwkset

import (
	"crypto"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// signToken signs claims with key as alg, with kid in the header ("" for none).
func signToken(t *testing.T, key crypto.Signer, alg jose.SignatureAlgorithm, kid string, claims jwt.Claims) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestVerifyToken(t *testing.T) {
	rsaChain, ecChain := newChain(t, testcerts.RSA2048), newChain(t, testcerts.P256)
	rsaKey, err := ParseChain(rsaChain.PEM(), "", now)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ParseChain(ecChain.PEM(), "", now)
	if err != nil {
		t.Fatal(err)
	}
	set := []jose.JSONWebKey{rsaKey.JWK.Public(), ecKey.JWK.Public()}
	other := newChain(t, testcerts.RSA2048)
	good := jwt.Claims{Issuer: "https://idp.example", Subject: "alice", Audience: jwt.Audience{"api"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute))}
	with := func(mutate func(*jwt.Claims)) jwt.Claims {
		c := good
		mutate(&c)
		return c
	}
	want := Expectation{Issuer: "https://idp.example", Audience: "api"}
	hs := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2ln"
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + "."
	for _, tc := range []struct {
		name    string
		token   string
		expect  Expectation
		problem string // "" verifies
		message string
	}{
		{"rsa", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), good), want, "", ""},
		{"ec", signToken(t, ecChain.LeafKey, jose.ES256, ecKey.KeyID(), good), want, "", ""},
		{"no kid, one key fits", signToken(t, ecChain.LeafKey, jose.ES256, "", good), want, "", ""},
		{"no expectations", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.Issuer = "x" })), Expectation{}, "", ""},
		{"empty", "  ", want, TokenMalformed, "the token is empty"},
		{"not a JWT", "hello", want, TokenMalformed, "this has 1"},
		{"JWE", "a.b.c.d.e", want, TokenMalformed, "encrypted JWT"},
		{"header not base64", "!!.b.c", want, TokenMalformed, "header is not base64url"},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".b.c", want, TokenMalformed, "not a JSON object"},
		{"unsigned", none, want, TokenAlgorithm, "unsigned"},
		{"shared secret", hs, want, TokenAlgorithm, "shared-secret"},
		{"unknown kid", signToken(t, other.LeafKey, jose.RS256, "someone-else", good), want, TokenUnknownKey, "kid someone-else is not in the set (it holds " + rsaKey.KeyID() + " (RS256), "},
		{"alg not the key's", signToken(t, rsaChain.LeafKey, jose.PS256, rsaKey.KeyID(), good), want, TokenAlgorithm, "signed with PS256, and key " + rsaKey.KeyID() + " is published for RS256"},
		{"no kid, no key of alg", signToken(t, rsaChain.LeafKey, jose.RS512, "", good), want, TokenUnknownKey, "no key of the set is for RS512"},
		{"forged", signToken(t, other.LeafKey, jose.RS256, rsaKey.KeyID(), good), want, TokenSignature, "does not verify with key " + rsaKey.KeyID()},
		{"expired", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) })), want, TokenExpired, "expired at 2026-11-21T11:58:00Z (2m0s ago)"},
		{"expired within leeway", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) })),
			Expectation{Issuer: want.Issuer, Audience: want.Audience, Leeway: 5 * time.Minute}, "", ""},
		{"not yet valid", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) })), want, TokenNotYetValid, "not valid before"},
		{"audience", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other", "more"} })), want, TokenAudience, `audience ["other" "more"] does not include "api"`},
		{"issuer", signToken(t, rsaChain.LeafKey, jose.RS256, rsaKey.KeyID(), with(func(c *jwt.Claims) { c.Issuer = "https://evil.example" })), want, TokenIssuer, `issuer is "https://evil.example", not "https://idp.example"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := VerifyToken(tc.token, set, tc.expect, now)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("does not verify: %v", err)
				}
				if v.Subject != "alice" || v.KeyID == "" || v.Algorithm == "" {
					t.Errorf("verified %+v", v)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("error %v, want a TokenError %s", err, tc.problem)
			}
			if te.Problem != tc.problem || !strings.Contains(te.Message, tc.message) {
				t.Errorf("got %s %q, want %s containing %q", te.Problem, te.Message, tc.problem, tc.message)
			}
			if strings.Contains(te.Message, "\n") || (len(tc.token) > 20 && strings.Contains(te.Message, tc.token)) {
				t.Errorf("message is not one line without the token: %q", te.Message)
			}
		})
	}
}
