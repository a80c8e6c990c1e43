package jwtsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/util/keyutil"
	externaljwtv1 "k8s.io/externaljwt/apis/v1"

	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// Algorithms are the JWS algorithms kube-apiserver v1.37 takes from an external signer:
// its client refuses a Sign answer whose header names another ("bad signing algorithm",
// validateJWTHeader in pkg/serviceaccount/externaljwt/plugin/plugin.go), and its
// /openid/v1/jwks describes an RSA key as RS256 and an EC key by its curve, so PS* and
// RS384/RS512 keys, which would be published under another alg, are refused too.
var Algorithms = []string{string(jose.RS256), string(jose.ES256), string(jose.ES384), string(jose.ES512)}

// MaxKeyIDLength is the longest kid kube-apiserver accepts (1 KiB, in the Sign header
// and in FetchKeys).
const MaxKeyIDLength = 1024

// errUnusable marks a key kube-apiserver cannot use at all (a key type or algorithm it
// refuses): the signer refuses to start with one, and answers FailedPrecondition for one
// that arrives later.
var errUnusable = errors.New("unusable for kube-apiserver")

// unusablef is an error wrapping errUnusable.
func unusablef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnusable, fmt.Sprintf(format, args...))
}

// Snapshot is what the signer serves at one moment: the published set (FetchKeys) and
// the key to sign with (Sign). It never changes once built.
type Snapshot struct {
	// From says where it was read: "JWKSConfig ns/name", "state.json", "seed".
	From string
	// Set is the published JWK Set document, as read.
	Set []byte
	// Keys are the set's keys as FetchKeys answers them (PKIX DER), in the set's order.
	Keys []*externaljwtv1.Key
	// DataTimestamp is when the set was last written (the JWKSConfig's
	// status.lastUpdateTime).
	DataTimestamp time.Time
	// RefreshHint is how soon kube-apiserver should fetch the keys again
	// (spec.cacheMaxAge).
	RefreshHint time.Duration
	// KeysErr, when set, is why FetchKeys answers an error instead of Keys.
	KeysErr error

	// KeyID and Algorithm are the signing key's kid and alg, as published.
	KeyID, Algorithm string
	// SigningKeyPEM is the signing key as read (persisted with the set).
	SigningKeyPEM []byte
	// SignErr, when set, is why Sign answers FailedPrecondition instead of a signature.
	SignErr error

	signer jose.Signer
}

// Unusable is the first error of the snapshot that names a key kube-apiserver cannot
// use, or nil.
func (s *Snapshot) Unusable() error {
	for _, err := range []error{s.KeysErr, s.SignErr} {
		if errors.Is(err, errUnusable) {
			return err
		}
	}
	return nil
}

// Serves says whether the snapshot answers both FetchKeys and Sign.
func (s *Snapshot) Serves() bool { return s.KeysErr == nil && s.SignErr == nil }

// Input is what a snapshot is built from.
type Input struct {
	From string
	// Set is the published JWK Set (jwks.json); nil when there is none.
	Set []byte
	// SetErr says why there is no set.
	SetErr error
	// SigningKey is the PEM private key (tls.key) to sign with; nil when there is none.
	SigningKey []byte
	// SigningKeyErr says why there is no signing key.
	SigningKeyErr error
	DataTimestamp time.Time
	RefreshHint   time.Duration
}

// Build builds a snapshot: it checks every key of the set and the signing key against
// what kube-apiserver accepts, and that the signing key is in the set.
func Build(in Input) *Snapshot {
	s := &Snapshot{From: in.From, Set: in.Set, DataTimestamp: in.DataTimestamp, RefreshHint: in.RefreshHint, SigningKeyPEM: in.SigningKey}
	published, err := publishedKeys(in.Set, in.SetErr)
	if err != nil {
		s.KeysErr = err
	} else {
		for _, k := range published {
			der, err := x509.MarshalPKIXPublicKey(k.Key)
			if err != nil {
				s.KeysErr = fmt.Errorf("key %s of the published set: %w", k.KeyID, err)
				break
			}
			s.Keys = append(s.Keys, &externaljwtv1.Key{KeyId: k.KeyID, Key: der})
		}
	}
	s.KeyID, s.Algorithm, s.signer, s.SignErr = signingKey(in.SigningKey, in.SigningKeyErr, published, s.KeysErr)
	return s
}

// publishedKeys parses the set and checks each key: kube-apiserver drops a FetchKeys
// answer that has no key, a kid outside 1..1024 bytes or a key that is not PKIX, and its
// /openid/v1/jwks fails as a whole on one key that is neither RSA nor EC P-256/384/521.
func publishedKeys(set []byte, setErr error) ([]jose.JSONWebKey, error) {
	if setErr != nil {
		return nil, setErr
	}
	keys, err := jwkset.Unmarshal(set)
	if err != nil {
		return nil, fmt.Errorf("the published set (jwks.json) does not parse: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("the published set (jwks.json) holds no key")
	}
	for _, k := range keys {
		if k.KeyID == "" || len(k.KeyID) > MaxKeyIDLength {
			return nil, unusablef("a key of the published set has a kid of %d bytes; kube-apiserver accepts 1 to %d", len(k.KeyID), MaxKeyIDLength)
		}
		if err := usable(k.Key, k.Algorithm); err != nil {
			return nil, fmt.Errorf("key %s of the published set: %w", k.KeyID, err)
		}
	}
	return keys, nil
}

// usable checks a public or private key, and the alg it is published under, against
// what kube-apiserver v1.37 signs and verifies with.
func usable(key any, alg string) error {
	natural := ""
	switch k := key.(type) {
	case *rsa.PublicKey, *rsa.PrivateKey:
		natural = string(jose.RS256)
	case *ecdsa.PublicKey:
		natural = curveAlgorithm(k.Curve)
	case *ecdsa.PrivateKey:
		natural = curveAlgorithm(k.Curve)
	case ed25519.PublicKey, ed25519.PrivateKey:
		return unusablef("an Ed25519 key (EdDSA): kube-apiserver signs and verifies service account tokens with %s only", strings.Join(Algorithms, ", "))
	default:
		return unusablef("a %T key: kube-apiserver signs and verifies service account tokens with RSA and EC P-256/P-384/P-521 keys only", key)
	}
	if natural == "" {
		return unusablef("an EC key on a curve other than P-256, P-384 and P-521")
	}
	if alg != "" && alg != natural {
		return unusablef("published with alg %s: kube-apiserver takes this key only as %s (it accepts %s); drop spec.algorithm", alg, natural, strings.Join(Algorithms, ", "))
	}
	return nil
}

func curveAlgorithm(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return string(jose.ES256)
	case elliptic.P384():
		return string(jose.ES384)
	case elliptic.P521():
		return string(jose.ES512)
	}
	return ""
}

// signingKey parses the PEM private key, checks it, and finds it in the published set:
// a key that is not published is never signed with.
func signingKey(keyPEM []byte, keyErr error, published []jose.JSONWebKey, setErr error) (kid, alg string, signer jose.Signer, err error) {
	if keyErr != nil {
		return "", "", nil, keyErr
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return "", "", nil, fmt.Errorf("tls.key: %w", err)
	}
	if err := usable(parsed, ""); err != nil {
		return "", "", nil, fmt.Errorf("the signing key is %w", err)
	}
	private, ok := parsed.(crypto.Signer)
	if !ok {
		return "", "", nil, unusablef("the signing key is a %T", parsed)
	}
	thumb, err := (&jose.JSONWebKey{Key: private.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", "", nil, fmt.Errorf("the signing key's thumbprint: %w", err)
	}
	kid = base64.RawURLEncoding.EncodeToString(thumb)
	if setErr != nil {
		return kid, "", nil, fmt.Errorf("signing key %s: no usable published set to check it against: %w", kid, setErr)
	}
	i := slices.IndexFunc(published, func(k jose.JSONWebKey) bool { return k.KeyID == kid })
	if i < 0 {
		kids := make([]string, 0, len(published))
		for _, k := range published {
			kids = append(kids, k.KeyID)
		}
		return kid, "", nil, fmt.Errorf("signing key %s is not in the published set (%s): trustplane signs only with a published key", kid, strings.Join(kids, ", "))
	}
	// The kid is the RFC 7638 thumbprint of the key the set holds, so equal kids are
	// equal public keys; the published alg was checked with the set.
	alg = string(jose.RS256)
	if e, ok := private.(*ecdsa.PrivateKey); ok {
		alg = curveAlgorithm(e.Curve)
	}
	signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: private, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return kid, alg, nil, fmt.Errorf("signing key %s: %w", kid, err)
	}
	return kid, alg, signer, nil
}
