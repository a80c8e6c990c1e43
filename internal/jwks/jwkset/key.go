// Package jwkset turns X.509 certificates into JSON Web Keys (RFC 7517/7518/7638/8037) and
// plans how a published JWK Set changes when the signing certificate rotates. It has no
// Kubernetes client in it: the controller feeds it bytes and a clock.
package jwkset

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // x5t is defined as SHA-1 (RFC 7517 4.8)
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// MinRSABits is the smallest RSA modulus accepted (RFC 7518 3.3 requires 2048).
const MinRSABits = 2048

// Key is the signing key of one certificate chain, as a JWK.
type Key struct {
	// JWK is the public key with alg, use, kid, x5c, x5t and x5t#S256 set.
	JWK jose.JSONWebKey
	// NotAfter is the leaf certificate's expiry.
	NotAfter time.Time
}

// KeyID is the kid: the RFC 7638 SHA-256 thumbprint, base64url without padding.
func (k Key) KeyID() string { return k.JWK.KeyID }

// ParseChain parses a PEM certificate chain (leaf first, as in a kubernetes.io/tls
// Secret's tls.crt) into its leaf's JWK. algorithm overrides the JWS algorithm; empty
// picks the key's natural one. Every failure is an *InputError.
func ParseChain(pemChain []byte, algorithm string, now time.Time) (Key, error) {
	chain, err := parsePEMCertificates(pemChain)
	if err != nil {
		return Key{}, err
	}
	leaf := chain[0]
	alg, err := algorithmFor(leaf, algorithm)
	if err != nil {
		return Key{}, err
	}
	if now.After(leaf.NotAfter) {
		return Key{}, inputErrorf(jwksv1alpha1.ReasonCertificateExpired, "certificate %q expired at %s", leaf.Subject.String(), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	sha1Sum := sha1.Sum(leaf.Raw) //nolint:gosec // see import
	sha256Sum := sha256.Sum256(leaf.Raw)
	jwk := jose.JSONWebKey{
		Key:                         leaf.PublicKey,
		Algorithm:                   alg,
		Use:                         "sig",
		Certificates:                chain,
		CertificateThumbprintSHA1:   sha1Sum[:],
		CertificateThumbprintSHA256: sha256Sum[:],
	}
	thumb, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return Key{}, inputErrorf(jwksv1alpha1.ReasonUnsupportedKey, "computing the key thumbprint: %v", err)
	}
	jwk.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	return Key{JWK: jwk, NotAfter: leaf.NotAfter}, nil
}

// parsePEMCertificates reads every PEM block; each must be a CERTIFICATE, and there must
// be at least one. Text between blocks is allowed (openssl writes "subject=" lines).
func parsePEMCertificates(data []byte) ([]*x509.Certificate, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, inputErrorf(jwksv1alpha1.ReasonMissingCertificate, "tls.crt is empty")
	}
	var chain []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if len(chain) == MaxChainCertificates {
			return nil, inputErrorf(jwksv1alpha1.ReasonCertificateTooLarge, "tls.crt holds more than %d certificates, more than a chain may have here", MaxChainCertificates)
		}
		if block.Type != "CERTIFICATE" {
			return nil, inputErrorf(jwksv1alpha1.ReasonNotACertificate, "tls.crt block %d is a %q PEM block, want CERTIFICATE", len(chain)+1, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, inputErrorf(jwksv1alpha1.ReasonInvalidCertificate, "tls.crt certificate %d: %v", len(chain)+1, err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, inputErrorf(jwksv1alpha1.ReasonInvalidPEM, "tls.crt holds no PEM block")
	}
	return chain, nil
}

// algorithmFor picks the JWS algorithm for a public key (RFC 7518 3.1, RFC 8037), or
// checks that an override fits it.
func algorithmFor(leaf *x509.Certificate, override string) (string, error) {
	var natural string
	var allowed []string
	switch k := leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits {
			return "", inputErrorf(jwksv1alpha1.ReasonWeakKey, "RSA key has %d bits, at least %d are required", bits, MinRSABits)
		}
		natural = string(jose.RS256)
		allowed = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			natural = string(jose.ES256)
		case elliptic.P384():
			natural = string(jose.ES384)
		case elliptic.P521():
			natural = string(jose.ES512)
		default:
			return "", inputErrorf(jwksv1alpha1.ReasonUnsupportedKey, "EC curve %s is not supported (use P-256, P-384 or P-521)", k.Curve.Params().Name)
		}
		allowed = []string{natural}
	case ed25519.PublicKey:
		natural = string(jose.EdDSA)
		allowed = []string{natural}
	default:
		return "", inputErrorf(jwksv1alpha1.ReasonUnsupportedKey, "public key algorithm %s is not supported (use RSA, EC P-256/P-384/P-521 or Ed25519)", keyAlgorithmName(leaf))
	}
	if override == "" {
		return natural, nil
	}
	for _, a := range allowed {
		if a == override {
			return override, nil
		}
	}
	return "", inputErrorf(jwksv1alpha1.ReasonInvalidAlgorithm, "algorithm %s does not fit the certificate's key (allowed: %v)", override, allowed)
}

// keyAlgorithmName names the certificate's key algorithm, also for those Go's x509 does
// not know (Ed448 parses with PublicKeyAlgorithm unknown and no key).
func keyAlgorithmName(cert *x509.Certificate) string {
	if cert.PublicKeyAlgorithm == x509.UnknownPublicKeyAlgorithm {
		if oid, ok := unknownKeyOIDs[publicKeyOID(cert)]; ok {
			return oid
		}
		return "unknown (OID " + publicKeyOID(cert) + ")"
	}
	return cert.PublicKeyAlgorithm.String()
}

var unknownKeyOIDs = map[string]string{
	"1.3.101.110": "X25519",
	"1.3.101.111": "X448",
	"1.3.101.113": "Ed448",
}

// publicKeyOID reads the algorithm OID of the certificate's SubjectPublicKeyInfo.
func publicKeyOID(cert *x509.Certificate) string {
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(cert.RawSubjectPublicKeyInfo, &spki); err != nil {
		return "?"
	}
	return spki.Algorithm.Algorithm.String()
}

// KeyIDOf is the kid ParseChain gives the chain's leaf key, whatever the certificate's
// validity: what a Secret already holds, not what may be published.
func KeyIDOf(pemChain []byte) (string, error) {
	chain, err := parsePEMCertificates(pemChain)
	if err != nil {
		return "", err
	}
	thumb, err := (&jose.JSONWebKey{Key: chain[0].PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", inputErrorf(jwksv1alpha1.ReasonUnsupportedKey, "computing the key thumbprint: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(thumb), nil
}
