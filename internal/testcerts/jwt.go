package testcerts

import (
	"crypto"
	"encoding/json"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// SignJWT is a compact JWT of issuer for audience, valid ten minutes, signed with key
// under kid and alg, as a token issuer signs with a published key.
func SignJWT(key crypto.Signer, kid, alg, issuer, audience, subject string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	payload, err := json.Marshal(map[string]any{
		"iss": issuer, "aud": audience, "sub": subject, "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
	})
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
