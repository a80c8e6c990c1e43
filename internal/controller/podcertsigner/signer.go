package podcertsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// CA is the signing certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// ParseCA reads a CA from a kubernetes.io/tls Secret's tls.crt and tls.key.
func ParseCA(crtPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(crtPEM)
	if cb == nil {
		return nil, errors.New("tls.crt holds no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("tls.crt is not a CA certificate")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("tls.key holds no PEM key")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if ec, ecErr := x509.ParseECPrivateKey(kb.Bytes); ecErr == nil {
			key = ec
		} else if rsaKey, rsaErr := x509.ParsePKCS1PrivateKey(kb.Bytes); rsaErr == nil {
			key = rsaKey
		} else {
			return nil, fmt.Errorf("tls.key: %w", err)
		}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("tls.key cannot sign")
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// Policy is what the signer issues.
type Policy struct {
	// MaxLifetime caps the certificate lifetime (the request's maxExpirationSeconds too).
	MaxLifetime time.Duration
	// KeyTypes allowed; a request for another is denied UnsupportedKeyType.
	KeyTypes map[string]bool
	// TrustDomain of the SPIFFE ID spiffe://<domain>/ns/<namespace>/sa/<serviceaccount>.
	TrustDomain string
}

// Denial is a request the signer refuses; Reason becomes the Denied condition's reason.
type Denial struct{ Reason, Message string }

func (d *Denial) Error() string { return d.Reason + ": " + d.Message }

// Issued is the status of an issued request.
type Issued struct {
	Chain                               string
	NotBefore, BeginRefreshAt, NotAfter time.Time
}

// Sign issues the request at now, or returns a *Denial. It checks the proof of
// possession and the key type, and fits the times into the rules the API enforces:
// lifetime ≥ 1h and ≤ maxExpirationSeconds, notBefore near now, beginRefreshAt within
// [notBefore+10m, notAfter−10m].
func Sign(ca *CA, pcr *certificatesv1.PodCertificateRequest, policy Policy, now time.Time) (*Issued, error) {
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		return nil, &Denial{"InvalidProofOfPossession", "stubPKCS10Request does not parse"}
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, &Denial{"InvalidProofOfPossession", "stubPKCS10Request is not signed by its key"}
	}
	keyType := KeyTypeOf(csr.PublicKey)
	if len(policy.KeyTypes) > 0 && !policy.KeyTypes[keyType] {
		return nil, &Denial{certificatesv1.PodCertificateRequestConditionUnsupportedKeyType, fmt.Sprintf("key type %s is not issued by this signer", keyType)}
	}
	lifetime := policy.MaxLifetime
	if pcr.Spec.MaxExpirationSeconds != nil {
		if requested := time.Duration(*pcr.Spec.MaxExpirationSeconds) * time.Second; requested < lifetime {
			lifetime = requested
		}
	}
	if lifetime < time.Hour {
		return nil, &Denial{"LifetimeTooShort", fmt.Sprintf("a certificate must live at least 1h; at most %v was allowed", lifetime)}
	}
	notBefore := now.Add(-time.Minute).Truncate(time.Second)
	notAfter := notBefore.Add(lifetime)
	beginRefreshAt := notBefore.Add(lifetime * 2 / 3)
	if latest := notAfter.Add(-10 * time.Minute); beginRefreshAt.After(latest) {
		beginRefreshAt = latest
	}
	if earliest := notBefore.Add(10 * time.Minute); beginRefreshAt.Before(earliest) {
		beginRefreshAt = earliest
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	spiffe := &url.URL{Scheme: "spiffe", Host: policy.TrustDomain, Path: "/ns/" + pcr.Namespace + "/sa/" + pcr.Spec.ServiceAccountName}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{},
		URIs:         []*url.URL{spiffe},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})...)
	return &Issued{Chain: string(chain), NotBefore: notBefore, BeginRefreshAt: beginRefreshAt, NotAfter: notAfter}, nil
}

// KeyTypeOf names a public key the way PodCertificateProjection.keyType does.
func KeyTypeOf(pub any) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA" + strings.ReplaceAll(k.Curve.Params().Name, "-", "")
	case ed25519.PublicKey:
		return "ED25519"
	}
	return fmt.Sprintf("%T", pub)
}
