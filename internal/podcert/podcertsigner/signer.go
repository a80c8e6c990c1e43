package podcertsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
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

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// CA is the signing certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// ParseCA reads a CA from a kubernetes.io/tls Secret's tls.crt and tls.key.
func ParseCA(crtPEM, keyPEM []byte) (*CA, error) {
	e, err := podcert.ParseCAPair(crtPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: e.Cert, Key: e.Key}, nil
}

// Policy is what the signer issues.
type Policy struct {
	// MaxLifetime caps the certificate lifetime (the request's maxExpirationSeconds too).
	MaxLifetime time.Duration
	// KeyTypes allowed; a request for another is denied UnsupportedKeyType.
	KeyTypes map[string]bool
	// TrustDomain of the SPIFFE ID spiffe://<domain>/ns/<namespace>/sa/<serviceaccount>.
	TrustDomain string
	// RefreshFraction of the lifetime passes before beginRefreshAt (0: two thirds).
	RefreshFraction float64
	// Backdate puts notBefore this long before the signing.
	Backdate time.Duration
}

// defaultRefreshFraction is where cert-manager renews, and kubelet refreshes by default.
const defaultRefreshFraction = 2.0 / 3

// Denial is a request the signer refuses; Reason becomes the Denied condition's reason.
type Denial struct{ Reason, Message string }

func (d *Denial) Error() string { return d.Reason + ": " + d.Message }

// Issued is the status of an issued request.
type Issued struct {
	Chain                               string
	NotBefore, BeginRefreshAt, NotAfter time.Time
}

// Request is what Sign reads of a PodCertificateRequest, whichever API version carried it.
type Request struct {
	Namespace, ServiceAccountName string
	PodUID                        string
	MaxExpirationSeconds          *int32
	// StubPKCS10Request (v1), or PKIXPublicKey and ProofOfPossession (v1beta1 clients of
	// Kubernetes 1.35/1.36: the v1 API cannot carry these two fields).
	StubPKCS10Request, PKIXPublicKey, ProofOfPossession []byte
	// NotAfterBound, when set, caps notAfter (a terminating pod), never below the 1h minimum.
	NotAfterBound time.Time
	// Identity is what the certificate carries besides the SPIFFE ID (IdentityOf); zero:
	// no DNS name, and the default extended key usages.
	Identity Identity
}

// RequestOf reads a v1 PodCertificateRequest.
func RequestOf(pcr *certificatesv1.PodCertificateRequest) Request {
	return Request{Namespace: pcr.Namespace, ServiceAccountName: pcr.Spec.ServiceAccountName, PodUID: string(pcr.Spec.PodUID),
		MaxExpirationSeconds: pcr.Spec.MaxExpirationSeconds, StubPKCS10Request: pcr.Spec.StubPKCS10Request}
}

// PublicKey returns the request's public key once its proof of possession verifies, with
// the rules kube-apiserver applies (pkg/apis/certificates/validation): a stub PKCS#10
// request signed by the key; or a PKIX public key with a signature over the pod UID —
// Ed25519 over the bytes, ECDSA (ASN.1) over their SHA-256, RSA-PSS/SHA-256 over their
// SHA-256 — and exactly one of the two forms.
func (req Request) PublicKey() (any, *Denial) {
	stub, pkix := len(req.StubPKCS10Request) != 0, len(req.PKIXPublicKey) != 0 || len(req.ProofOfPossession) != 0
	switch {
	case stub && !pkix:
		csr, err := x509.ParseCertificateRequest(req.StubPKCS10Request)
		if err != nil {
			return nil, &Denial{certificates.ReasonInvalidProofOfPossession, "stubPKCS10Request does not parse"}
		}
		if err := csr.CheckSignature(); err != nil {
			return nil, &Denial{certificates.ReasonInvalidProofOfPossession, "stubPKCS10Request is not signed by its key"}
		}
		return csr.PublicKey, nil
	case !stub && len(req.PKIXPublicKey) != 0 && len(req.ProofOfPossession) != 0:
		pub, err := x509.ParsePKIXPublicKey(req.PKIXPublicKey)
		if err != nil {
			return nil, &Denial{certificates.ReasonInvalidProofOfPossession, "pkixPublicKey does not parse"}
		}
		digest := sha256.Sum256([]byte(req.PodUID))
		ok := false
		switch k := pub.(type) {
		case ed25519.PublicKey:
			ok = ed25519.Verify(k, []byte(req.PodUID), req.ProofOfPossession)
		case *ecdsa.PublicKey:
			ok = ecdsa.VerifyASN1(k, digest[:], req.ProofOfPossession)
		case *rsa.PublicKey:
			ok = rsa.VerifyPSS(k, crypto.SHA256, digest[:], req.ProofOfPossession, nil) == nil
		default:
			return nil, &Denial{certificatesv1.PodCertificateRequestConditionUnsupportedKeyType, fmt.Sprintf("public key type %T", pub)}
		}
		if !ok {
			return nil, &Denial{certificates.ReasonInvalidProofOfPossession, "proofOfPossession is not the key's signature over the pod UID"}
		}
		return pub, nil
	}
	return nil, &Denial{certificates.ReasonInvalidProofOfPossession, "exactly one of stubPKCS10Request or (pkixPublicKey, proofOfPossession) must be set"}
}

// Sign issues the request at now, or returns a *Denial: Check, ValidityOf, then Issue.
// The controller runs the three apart, so that only ValidityOf, which depends on which CA
// signs, runs under its CA lock, and the public-key work of the other two does not queue
// behind it.
func Sign(ca *CA, req Request, policy Policy, now time.Time) (*Issued, error) {
	pub, err := req.Check(policy)
	if err != nil {
		return nil, err
	}
	validity, err := ValidityOf(ca, req, policy, now)
	if err != nil {
		return nil, err
	}
	return Issue(ca, pub, req, policy, validity)
}

// Check returns the request's public key once its proof of possession verifies and the
// policy issues its key type, or a *Denial.
func (req Request) Check(policy Policy) (any, error) {
	pub, denial := req.PublicKey()
	if denial != nil {
		return nil, denial
	}
	keyType := KeyTypeOf(pub)
	if len(policy.KeyTypes) > 0 && !policy.KeyTypes[keyType] {
		return nil, &Denial{certificatesv1.PodCertificateRequestConditionUnsupportedKeyType, fmt.Sprintf("key type %s is not issued by this signer", keyType)}
	}
	return pub, nil
}

// Validity is when an issued certificate is valid, and when kubelet refreshes it.
type Validity struct {
	NotBefore, BeginRefreshAt, NotAfter time.Time
}

// ValidityOf fits the times of the request, issued at now by ca, into the rules the API
// enforces: lifetime ≥ 1h and ≤ maxExpirationSeconds, notBefore near now (policy.Backdate
// before it), beginRefreshAt policy.RefreshFraction into the lifetime but within
// [notBefore+10m, notAfter−10m]. The leaf lies inside the CA certificate's validity:
// notBefore no earlier than the CA's (the backdate is cut short), notAfter no later. A
// lifetime the request cannot have is a *Denial.
func ValidityOf(ca *CA, req Request, policy Policy, now time.Time) (Validity, error) {
	lifetime := policy.MaxLifetime
	if req.MaxExpirationSeconds != nil {
		if requested := time.Duration(*req.MaxExpirationSeconds) * time.Second; requested < lifetime {
			lifetime = requested
		}
	}
	if lifetime < time.Hour {
		return Validity{}, &Denial{certificates.ReasonLifetimeTooShort, fmt.Sprintf("a certificate must live at least 1h; at most %v was allowed", lifetime)}
	}
	notBefore := now.Add(-policy.Backdate).Truncate(time.Second)
	if notBefore.Before(ca.Cert.NotBefore) { // a leaf lies inside its CA's window
		notBefore = ca.Cert.NotBefore
	}
	notAfter := notBefore.Add(lifetime)
	if !req.NotAfterBound.IsZero() && notAfter.After(req.NotAfterBound) {
		notAfter = req.NotAfterBound.Truncate(time.Second)
		if minimum := notBefore.Add(time.Hour); notAfter.Before(minimum) {
			notAfter = minimum
		}
	}
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter.Truncate(time.Second)
		if notAfter.Sub(notBefore) < time.Hour {
			return Validity{}, errors.New("the CA certificate expires within the hour: rotate it")
		}
	}
	lifetime = notAfter.Sub(notBefore)
	fraction := policy.RefreshFraction
	if fraction == 0 {
		fraction = defaultRefreshFraction
	}
	beginRefreshAt := notBefore.Add(time.Duration(float64(lifetime) * fraction)).Truncate(time.Second)
	if latest := notAfter.Add(-10 * time.Minute); beginRefreshAt.After(latest) {
		beginRefreshAt = latest
	}
	if earliest := notBefore.Add(10 * time.Minute); beginRefreshAt.Before(earliest) {
		beginRefreshAt = earliest
	}
	return Validity{NotBefore: notBefore, BeginRefreshAt: beginRefreshAt, NotAfter: notAfter}, nil
}

// Issue signs pub's certificate for the request's service account with ca, valid as v says.
func Issue(ca *CA, pub any, req Request, policy Policy, v Validity) (*Issued, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	spiffe := &url.URL{Scheme: "spiffe", Host: policy.TrustDomain, Path: "/ns/" + req.Namespace + "/sa/" + req.ServiceAccountName}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{},
		URIs:         []*url.URL{spiffe},
		DNSNames:     req.Identity.DNSNames,
		NotBefore:    v.NotBefore,
		NotAfter:     v.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  req.Identity.ExtKeyUsages,
	}
	if len(tmpl.ExtKeyUsage) == 0 {
		tmpl.ExtKeyUsage = defaultExtKeyUsages
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})...)
	return &Issued{Chain: string(chain), NotBefore: v.NotBefore, BeginRefreshAt: v.BeginRefreshAt, NotAfter: v.NotAfter}, nil
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
