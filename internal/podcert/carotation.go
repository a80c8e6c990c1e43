package podcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/trustplane/trustplane/api/certificates"
)

// Keys and annotations of the CA Secret (a kubernetes.io/tls Secret) that carry a rotation.
const (
	// CACertKey and CAKeyKey hold the CA that signs now.
	CACertKey = "tls.crt"
	CAKeyKey  = "tls.key"
	// NextCertKey and NextKeyKey hold the next CA: published in the trust bundle, signing
	// from AnnotationNextSignsAt. An operator supplies a CA by writing these two keys.
	NextCertKey = "next.crt"
	NextKeyKey  = "next.key"
	// PreviousCertKey holds retired CAs (certificates only) still published because a leaf
	// they signed may still be live.
	PreviousCertKey = "previous.crt"

	// The CA Secret's annotations (api/certificates).
	AnnotationSigningSince  = certificates.AnnotationSigningSince
	AnnotationNextSignsAt   = certificates.AnnotationNextSignsAt
	AnnotationReservedUntil = certificates.AnnotationReservedUntil
)

// RotationAnnotations are the annotations of the CA Secret the rotation owns: a write of
// the rotation replaces all of them (ToSecret omits those without a value).
var RotationAnnotations = []string{AnnotationSigningSince, AnnotationNextSignsAt, AnnotationReservedUntil,
	certificates.AnnotationNextStage, certificates.AnnotationNextPreviewSince, certificates.AnnotationCanaryObservedSince,
	certificates.AnnotationNextLiveSince, certificates.AnnotationCanaryFailed}

// ReserveAhead is how far past the longest possible leaf a reservation reaches, so that a
// busy signer writes its CA Secret at most once per ReserveAhead, not once per leaf.
const ReserveAhead = 10 * time.Minute

// CAEntry is one CA of a rotation.
type CAEntry struct {
	Cert    *x509.Certificate
	CertPEM []byte
	// Issuers are the certificates that followed the CA in tls.crt (or next.crt), each
	// the issuer of the one before: kept so that the Secret keeps its chain when the signer
	// writes it back; only the CA itself is published and signs.
	Issuers []*x509.Certificate
	// Key and KeyPEM are nil for a retired CA.
	Key    crypto.Signer
	KeyPEM []byte
	// Reserved is no earlier than the notAfter of every leaf this CA has signed (zero: none).
	Reserved time.Time
}

// Fingerprint identifies the CA certificate.
func (e *CAEntry) Fingerprint() string {
	sum := sha256.Sum256(e.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// Rotation is the signer's CAs: the current one signs; the next one is published and signs
// from NextSignsAt; previous ones stay published until every leaf they signed has expired.
type Rotation struct {
	Current      *CAEntry
	SigningSince time.Time
	Next         *CAEntry
	// NextSignsAt is zero for a next CA an operator supplied and that is not scheduled yet.
	NextSignsAt time.Time
	Previous    []*CAEntry
	// NextError says why next.crt/next.key were ignored (they stay in the Secret untouched).
	NextError error
	rawNext   [2][]byte
	// Canary is the next CA's canary (canary.go); its zero value: no next CA, or one that
	// went live without a canary.
	Canary Canary
}

// RotationPolicy says when to rotate.
type RotationPolicy struct {
	// Every is how long a CA signs before the signer generates the next one (0: never;
	// supplied CAs are still rotated in).
	Every time.Duration
	// Overlap is how long a new CA is published before it signs.
	Overlap time.Duration
	// MaxLifetime is the longest leaf the signer issues.
	MaxLifetime time.Duration
	// Observation, when not 0, canaries every next CA: it is published in the preview
	// bundle only, and goes live once canaries have been observed this long without a
	// failure (Canary). 0: a next CA is live at once.
	Observation time.Duration
}

// generateAhead is how long before the current CA's turn ends the next one is generated:
// its overlap in the live bundle, and the observation of its canary before that.
func (p RotationPolicy) generateAhead() time.Duration { return p.Overlap + p.Observation }

// Validate returns a one-line error for a policy that cannot work.
func (p RotationPolicy) Validate() error {
	switch {
	case p.Overlap < 0:
		return fmt.Errorf("--podcertificate-signer-ca-overlap must not be negative, not %v", p.Overlap)
	case p.Every < 0:
		return fmt.Errorf("--podcertificate-signer-ca-rotation must not be negative, not %v", p.Every)
	case p.Observation < 0:
		return fmt.Errorf("--podcertificate-signer-canary-observation must not be negative, not %v", p.Observation)
	case p.Every > 0 && p.Every <= p.generateAhead():
		return fmt.Errorf("--podcertificate-signer-ca-rotation (%v) must be longer than --podcertificate-signer-ca-overlap (%v) plus --podcertificate-signer-canary-observation (%v)",
			p.Every, p.Overlap, p.Observation)
	}
	return nil
}

// CAClockSkew is how far in the future a CA's notBefore may lie and the CA still sign:
// the clock of whoever made it may run a little ahead of this replica's. A leaf never
// starts before its CA (ValidityOf), so such a leaf starts at most this far ahead.
const CAClockSkew = time.Minute

// ParseCAPair parses a CA certificate, optionally followed by its issuers (each signed by
// the next), and its private key (PKCS#8, SEC 1 or PKCS#1). It refuses, saying which
// check failed, a certificate that is not a CA, has no keyCertSign key usage, is not
// signed by the issuer after it, or whose key is not the one given.
func ParseCAPair(crtPEM, keyPEM []byte) (*CAEntry, error) {
	chain, err := parseCAChain(crtPEM)
	if err != nil {
		return nil, err
	}
	cert := chain[0]
	signer, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the key does not match the certificate's public key")
	}
	return &CAEntry{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), Issuers: chain[1:], Key: signer, KeyPEM: keyPEM}, nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("the key holds no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if ec, ecErr := x509.ParseECPrivateKey(kb.Bytes); ecErr == nil {
			key = ec
		} else if rsaKey, rsaErr := x509.ParsePKCS1PrivateKey(kb.Bytes); rsaErr == nil {
			key = rsaKey
		} else {
			return nil, fmt.Errorf("the key: %w", err)
		}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the key cannot sign")
	}
	return signer, nil
}

// parseCAChain reads the CA and its issuers and checks that the CA can sign certificates
// and that each certificate is signed by the next: a chain that does not link would hand
// relying parties who trust its root leaves they cannot verify.
func parseCAChain(crtPEM []byte) ([]*x509.Certificate, error) {
	chain, err := ParseCertificates(crtPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate: %w", err)
	}
	ca := chain[0]
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return nil, errors.New("the certificate is not a CA certificate (basicConstraints CA:TRUE)")
	}
	if ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the CA certificate lacks the keyCertSign key usage")
	}
	for i := 0; i+1 < len(chain); i++ {
		if err := chain[i].CheckSignatureFrom(chain[i+1]); err != nil {
			return nil, fmt.Errorf("certificate %d of the chain (%q) is not signed by certificate %d (%q): %w",
				i+1, chain[i].Subject.String(), i+2, chain[i+1].Subject.String(), err)
		}
	}
	return chain, nil
}

// ParseCertificates parses PEM that holds CERTIFICATE blocks only (text between them is
// passed over), in their order: a chain, leaf first, or a bundle.
func ParseCertificates(raw []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificate %d is a PEM %s block, not CERTIFICATE", len(certs)+1, b.Type)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// CheckValidAt says why the CA cannot sign at now: not valid yet (beyond CAClockSkew),
// or expired. A leaf it signed would not verify, or only later.
func (e *CAEntry) CheckValidAt(now time.Time) error {
	switch {
	case e.Cert.NotBefore.After(now.Add(CAClockSkew)):
		return fmt.Errorf("the CA is not valid before %s", e.Cert.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(e.Cert.NotAfter):
		return fmt.Errorf("the CA expired at %s", e.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// ChainPEM is the CA and its issuers, as tls.crt holds them.
func (e *CAEntry) ChainPEM() []byte {
	out := append([]byte(nil), e.CertPEM...)
	for _, c := range e.Issuers {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// NewCA generates a self-signed P-256 CA valid from an hour before now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*CAEntry, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return ParseCAPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// RotationFromSecret reads a rotation from the CA Secret's data and annotations at now.
// An error means the current CA does not parse, fails a check of ParseCAPair, or cannot
// sign at now (CheckValidAt): the caller keeps its last good rotation. A next CA that
// does not parse, fails a check or has expired is ignored (NextError) and kept as it is;
// one not valid yet is published and signs once it is (Advance).
func RotationFromSecret(data map[string][]byte, annotations map[string]string, now time.Time) (*Rotation, error) {
	current, err := ParseCAPair(data[CACertKey], data[CAKeyKey])
	if err == nil {
		err = current.CheckValidAt(now)
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", CACertKey, CAKeyKey, err)
	}
	reserved := map[string]string{}
	if raw := annotations[AnnotationReservedUntil]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &reserved); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", AnnotationReservedUntil, err)
		}
	}
	parseTime := func(name string) (time.Time, error) {
		if annotations[name] == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339, annotations[name])
		if err != nil {
			return time.Time{}, fmt.Errorf("annotation %s: %w", name, err)
		}
		return t, nil
	}
	r := &Rotation{Current: current}
	if r.SigningSince, err = parseTime(AnnotationSigningSince); err != nil {
		return nil, err
	}
	if r.SigningSince.IsZero() {
		r.SigningSince = current.Cert.NotBefore
	}
	withReservation := func(e *CAEntry) (*CAEntry, error) {
		if s := reserved[e.Fingerprint()]; s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return nil, fmt.Errorf("annotation %s: %w", AnnotationReservedUntil, err)
			}
			e.Reserved = t
		}
		return e, nil
	}
	if _, err := withReservation(current); err != nil {
		return nil, err
	}
	if len(data[NextCertKey]) != 0 || len(data[NextKeyKey]) != 0 {
		next, err := ParseCAPair(data[NextCertKey], data[NextKeyKey])
		if err == nil && !now.Before(next.Cert.NotAfter) {
			err = fmt.Errorf("the CA expired at %s", next.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		if err != nil {
			r.NextError = fmt.Errorf("%s/%s: %w", NextCertKey, NextKeyKey, err)
			r.rawNext = [2][]byte{data[NextCertKey], data[NextKeyKey]}
		} else if next.Fingerprint() != current.Fingerprint() {
			r.Next = next
			if r.NextSignsAt, err = parseTime(AnnotationNextSignsAt); err != nil {
				return nil, err
			}
			if r.Canary, err = canaryFromAnnotations(annotations, parseTime); err != nil {
				return nil, err
			}
		}
	}
	var previous []*x509.Certificate
	if len(data[PreviousCertKey]) != 0 {
		if previous, err = ParseCertificates(data[PreviousCertKey]); err != nil {
			return nil, fmt.Errorf("%s: %w", PreviousCertKey, err)
		}
	}
	for _, cert := range previous {
		e, err := withReservation(&CAEntry{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})})
		if err != nil {
			return nil, err
		}
		r.Previous = append(r.Previous, e)
	}
	return r, nil
}

// ToSecret renders the rotation as the CA Secret's data and the annotations it owns.
func (r *Rotation) ToSecret() (map[string][]byte, map[string]string) {
	data := map[string][]byte{CACertKey: r.Current.ChainPEM(), CAKeyKey: r.Current.KeyPEM}
	annotations := map[string]string{AnnotationSigningSince: r.SigningSince.UTC().Format(time.RFC3339)}
	reserved := map[string]string{}
	if !r.Current.Reserved.IsZero() {
		reserved[r.Current.Fingerprint()] = r.Current.Reserved.UTC().Format(time.RFC3339)
	}
	switch {
	case r.Next != nil:
		data[NextCertKey], data[NextKeyKey] = r.Next.ChainPEM(), r.Next.KeyPEM
		if !r.NextSignsAt.IsZero() {
			annotations[AnnotationNextSignsAt] = r.NextSignsAt.UTC().Format(time.RFC3339)
		}
		r.Canary.toAnnotations(annotations)
	case r.NextError != nil:
		data[NextCertKey], data[NextKeyKey] = r.rawNext[0], r.rawNext[1]
	}
	var previous []byte
	for _, e := range r.Previous {
		previous = append(previous, e.CertPEM...)
		if !e.Reserved.IsZero() {
			reserved[e.Fingerprint()] = e.Reserved.UTC().Format(time.RFC3339)
		}
	}
	if len(previous) > 0 {
		data[PreviousCertKey] = previous
	}
	raw, _ := json.Marshal(reserved)
	annotations[AnnotationReservedUntil] = string(raw)
	return data, annotations
}

// Advance moves the rotation to now: schedules a supplied next CA, lets the next CA sign
// once its overlap has passed, drops retired CAs whose leaves have all expired, and
// generates the next CA when the schedule says so. It reports whether anything changed.
func (r *Rotation) Advance(now time.Time, p RotationPolicy, generate func(now time.Time) (*CAEntry, error)) (bool, error) {
	changed := false
	if r.Next != nil && r.NextSignsAt.IsZero() {
		if p.Observation > 0 && r.Canary.Stage != StageLive {
			// Canaried: the canary (GoLive) decides when it is live and scheduled.
			if r.Canary.Stage != StagePreview {
				r.Canary, changed = Canary{Stage: StagePreview, PreviewSince: now.Truncate(time.Second)}, true
			}
		} else {
			r.goLive(now, p)
			changed = true
		}
	}
	// A next CA not valid yet is published but waits to sign until it is.
	if r.Next != nil && !r.NextSignsAt.IsZero() && !now.Before(r.NextSignsAt) && r.Next.CheckValidAt(now) == nil {
		retired := &CAEntry{Cert: r.Current.Cert, CertPEM: r.Current.CertPEM, Reserved: r.Current.Reserved}
		r.Previous = append([]*CAEntry{retired}, r.Previous...)
		r.Current, r.SigningSince, r.Next, r.NextSignsAt, r.Canary = r.Next, r.NextSignsAt, nil, time.Time{}, Canary{}
		changed = true
	}
	kept := r.Previous[:0]
	for _, e := range r.Previous {
		if e.Reserved.IsZero() || now.After(e.Reserved) {
			changed = true
			continue
		}
		kept = append(kept, e)
	}
	r.Previous = kept
	if p.Every > 0 && r.Next == nil && r.NextError == nil && !now.Before(r.SigningSince.Add(p.Every-p.generateAhead())) && generate != nil {
		next, err := generate(now)
		if err != nil {
			return changed, fmt.Errorf("generating the next CA: %w", err)
		}
		r.Next, changed = next, true
		if p.Observation > 0 {
			r.Canary = Canary{Stage: StagePreview, PreviewSince: now.Truncate(time.Second)}
		} else {
			r.goLive(now, p)
		}
	}
	return changed, nil
}

// NextChange is when Advance will next have something to do (zero: never, until an
// operator supplies a CA).
func (r *Rotation) NextChange(p RotationPolicy) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if r.Next != nil && !r.NextSignsAt.IsZero() {
		consider(latest(r.NextSignsAt, r.Next.Cert.NotBefore.Add(-CAClockSkew)))
	}
	for _, e := range r.Previous {
		if !e.Reserved.IsZero() {
			consider(e.Reserved.Add(time.Second))
		}
	}
	if p.Every > 0 && r.Next == nil {
		consider(r.SigningSince.Add(p.Every - p.generateAhead()))
	}
	return next
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Reserve records that the current CA is about to sign a leaf valid until notAfter. It
// reports whether the reservation grew, so that the caller must persist the rotation
// before it releases the leaf; a grown reservation reaches MaxLifetime+ReserveAhead past
// now, so that the following leaves fit in it.
func (r *Rotation) Reserve(now, notAfter time.Time, p RotationPolicy) bool {
	if !notAfter.After(r.Current.Reserved) {
		return false
	}
	until := now.Add(p.MaxLifetime + ReserveAhead)
	if notAfter.After(until) {
		until = notAfter
	}
	r.Current.Reserved = until.Truncate(time.Second).Add(time.Second)
	return true
}

// Bundle is the PEM trust bundle every workload loads (the live bundle): the current CA,
// the next one once it is live, then the previous ones.
func (r *Rotation) Bundle() string {
	next := r.Next
	if r.Canary.Stage == StagePreview {
		next = nil
	}
	return bundleOf(append([]*CAEntry{r.Current, next}, r.Previous...))
}

// PreviewBundle is the PEM trust bundle the canaries load: every CA, the next one too at
// every stage, so that it is complete on its own (a canary loads it alone).
func (r *Rotation) PreviewBundle() string {
	return bundleOf(append([]*CAEntry{r.Current, r.Next}, r.Previous...))
}

func bundleOf(entries []*CAEntry) string {
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, e := range entries {
		if e == nil || seen[e.Fingerprint()] {
			continue
		}
		seen[e.Fingerprint()] = true
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.Cert.Raw}))
	}
	return out.String()
}

// Clone copies the rotation deeply enough that Advance and Reserve on the copy leave the
// original untouched.
func (r *Rotation) Clone() *Rotation {
	c := *r
	cur := *r.Current
	c.Current = &cur
	if r.Next != nil {
		n := *r.Next
		c.Next = &n
	}
	c.Previous = make([]*CAEntry, len(r.Previous))
	for i, e := range r.Previous {
		p := *e
		c.Previous[i] = &p
	}
	return &c
}
