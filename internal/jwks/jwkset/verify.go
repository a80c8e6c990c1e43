package jwkset

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// What VerifyToken found wrong with a token (TokenError.Problem).
const (
	// TokenMalformed: not a signed JWT (three base64url parts, a JSON header and claims).
	TokenMalformed = "NotAJWT"
	// TokenUnknownKey: no key of the set has the token's kid (or, without a kid, fits it).
	TokenUnknownKey = "UnknownKeyID"
	// TokenAlgorithm: the token's alg is none, a shared-secret one, or not the key's.
	TokenAlgorithm = "Algorithm"
	// TokenSignature: the key of the token's kid does not verify its signature.
	TokenSignature = "Signature"
	// TokenExpired: now is past exp.
	TokenExpired = "Expired"
	// TokenNotYetValid: now is before nbf.
	TokenNotYetValid = "NotYetValid"
	// TokenAudience: aud does not hold the expected audience.
	TokenAudience = "Audience"
	// TokenIssuer: iss is not the expected issuer.
	TokenIssuer = "Issuer"
)

// TokenError says why a token does not verify. Its message names keys, algorithms, times
// and claims, never the token or a signature.
type TokenError struct {
	Problem string
	Message string
}

func (e *TokenError) Error() string { return e.Message }

func tokenErrorf(problem, format string, args ...any) *TokenError {
	return &TokenError{Problem: problem, Message: fmt.Sprintf(format, args...)}
}

// Expectation is what a relying party checks beyond the signature.
type Expectation struct {
	// Issuer, when set, must be the token's iss exactly.
	Issuer string
	// Audience, when set, must be one of the token's aud.
	Audience string
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
}

// VerifiedToken is what a token that verifies says (its claims, not its content).
type VerifiedToken struct {
	KeyID, Algorithm         string
	Issuer, Subject          string
	Audience                 []string
	Expiry, NotBefore, Issue time.Time
}

// asymmetric are the JWS algorithms a public JWK verifies.
var asymmetric = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// VerifyToken verifies a compact JWT against the keys of a JWK Set as a relying party
// does (kube-apiserver's JWT authenticator, go-oidc): the key is the one of the token's
// kid, whose alg (when the set publishes one) must be the token's; then the signature,
// exp and nbf (with e.Leeway), aud and iss. A failure is a *TokenError naming the first
// problem found, in that order.
func VerifyToken(raw string, keys []jose.JSONWebKey, e Expectation, now time.Time) (VerifiedToken, error) {
	raw = strings.TrimSpace(raw)
	header, err := tokenHeader(raw)
	if err != nil {
		return VerifiedToken{}, err
	}
	alg := jose.SignatureAlgorithm(header.Alg)
	switch {
	case header.Alg == "" || strings.EqualFold(header.Alg, "none"):
		return VerifiedToken{}, tokenErrorf(TokenAlgorithm, "the token is unsigned (alg %q)", header.Alg)
	case strings.HasPrefix(header.Alg, "HS"):
		return VerifiedToken{}, tokenErrorf(TokenAlgorithm, "alg %s is a shared-secret algorithm: a JWK Set verifies public-key signatures only", header.Alg)
	case !slices.Contains(asymmetric, alg):
		return VerifiedToken{}, tokenErrorf(TokenAlgorithm, "alg %q is not a JWS algorithm a public key verifies", header.Alg)
	}
	candidates, err := keysFor(header.Kid, alg, keys)
	if err != nil {
		return VerifiedToken{}, err
	}
	sig, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{alg})
	if err != nil {
		return VerifiedToken{}, tokenErrorf(TokenMalformed, "not a JWT: %v", err)
	}
	var payload []byte
	var used jose.JSONWebKey
	for _, k := range candidates {
		if payload, err = sig.Verify(k.Key); err == nil {
			used = k
			break
		}
	}
	if payload == nil {
		if header.Kid != "" {
			return VerifiedToken{}, tokenErrorf(TokenSignature, "the signature does not verify with key %s (%s)", header.Kid, alg)
		}
		return VerifiedToken{}, tokenErrorf(TokenSignature, "the token has no kid, and no key of the set for %s verifies its signature", alg)
	}
	var claims jwt.Claims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return VerifiedToken{}, tokenErrorf(TokenMalformed, "not a JWT: the signed payload is not a JSON claims set (%v)", err)
	}
	v := VerifiedToken{KeyID: used.KeyID, Algorithm: string(alg), Issuer: claims.Issuer, Subject: claims.Subject, Audience: claims.Audience}
	if claims.Expiry != nil {
		v.Expiry = claims.Expiry.Time().UTC()
	}
	if claims.NotBefore != nil {
		v.NotBefore = claims.NotBefore.Time().UTC()
	}
	if claims.IssuedAt != nil {
		v.Issue = claims.IssuedAt.Time().UTC()
	}
	switch {
	case !v.Expiry.IsZero() && now.After(v.Expiry.Add(e.Leeway)):
		return v, tokenErrorf(TokenExpired, "the token expired at %s (%s ago)", v.Expiry.Format(time.RFC3339), now.Sub(v.Expiry).Round(time.Second))
	case !v.NotBefore.IsZero() && now.Before(v.NotBefore.Add(-e.Leeway)):
		return v, tokenErrorf(TokenNotYetValid, "the token is not valid before %s (in %s)", v.NotBefore.Format(time.RFC3339), v.NotBefore.Sub(now).Round(time.Second))
	case e.Audience != "" && !claims.Audience.Contains(e.Audience):
		return v, tokenErrorf(TokenAudience, "the token's audience %q does not include %q", []string(claims.Audience), e.Audience)
	case e.Issuer != "" && claims.Issuer != e.Issuer:
		return v, tokenErrorf(TokenIssuer, "the token's issuer is %q, not %q", claims.Issuer, e.Issuer)
	}
	return v, nil
}

type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// tokenHeader reads the protected header of a compact JWS, with one-line reasons for
// what is not one.
func tokenHeader(raw string) (jwsHeader, error) {
	var h jwsHeader
	switch n := strings.Count(raw, ".") + 1; {
	case raw == "":
		return h, tokenErrorf(TokenMalformed, "not a JWT: the token is empty")
	case n == 5:
		return h, tokenErrorf(TokenMalformed, "not a JWT that can be verified: it has five parts, an encrypted JWT (JWE)")
	case n != 3:
		return h, tokenErrorf(TokenMalformed, "not a JWT: a JWT is three base64url parts separated by '.', this has %d", n)
	}
	part := raw[:strings.IndexByte(raw, '.')]
	decoded, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return h, tokenErrorf(TokenMalformed, "not a JWT: the header is not base64url")
	}
	if err := json.Unmarshal(decoded, &h); err != nil {
		return h, tokenErrorf(TokenMalformed, "not a JWT: the header is not a JSON object")
	}
	return h, nil
}

// keysFor are the keys that may have signed a token of kid and alg: the one of its kid
// (whose published alg, if any, must be alg), or without a kid every key of alg.
func keysFor(kid string, alg jose.SignatureAlgorithm, keys []jose.JSONWebKey) ([]jose.JSONWebKey, error) {
	if kid != "" {
		for _, k := range keys {
			if k.KeyID != kid {
				continue
			}
			if k.Algorithm != "" && k.Algorithm != string(alg) {
				return nil, tokenErrorf(TokenAlgorithm, "the token is signed with %s, and key %s is published for %s", alg, kid, k.Algorithm)
			}
			if k.Use != "" && k.Use != "sig" {
				return nil, tokenErrorf(TokenAlgorithm, "key %s is published for use %q, not signatures", kid, k.Use)
			}
			return []jose.JSONWebKey{k}, nil
		}
		return nil, tokenErrorf(TokenUnknownKey, "kid %s is not in the set (it holds %s)", kid, kidList(keys))
	}
	var out []jose.JSONWebKey
	for _, k := range keys {
		if k.Algorithm == "" || k.Algorithm == string(alg) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, tokenErrorf(TokenUnknownKey, "the token has no kid, and no key of the set is for %s (it holds %s)", alg, kidList(keys))
	}
	return out, nil
}

func kidList(keys []jose.JSONWebKey) string {
	if len(keys) == 0 {
		return "no keys"
	}
	kids := make([]string, len(keys))
	for i, k := range keys {
		kids[i] = k.KeyID
		if k.Algorithm != "" {
			kids[i] += " (" + k.Algorithm + ")"
		}
	}
	return strings.Join(kids, ", ")
}
