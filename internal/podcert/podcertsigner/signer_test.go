package podcertsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/trustplane/trustplane/internal/podcert"
)

// proof signs the pod UID the way a Kubernetes 1.35/1.36 kubelet does for a v1beta1 request
// (pkg/kubelet/podcertificate before the stub PKCS#10 request).
func proof(t *testing.T, key crypto.Signer, podUID string) []byte {
	t.Helper()
	var sig []byte
	var err error
	digest := sha256.Sum256([]byte(podUID))
	switch k := key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(podUID))
	case *ecdsa.PrivateKey:
		sig, err = ecdsa.SignASN1(rand.Reader, k, digest[:])
	case *rsa.PrivateKey:
		sig, err = rsa.SignPSS(rand.Reader, k, crypto.SHA256, digest[:], nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestSignV1beta1ProofOfPossession(t *testing.T) {
	now := time.Now()
	ca, err := podcert.NewCA("ca", now, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{MaxLifetime: 24 * time.Hour, TrustDomain: "cluster.local",
		KeyTypes: map[string]bool{"ED25519": true, "ECDSAP256": true, "ECDSAP384": true, "RSA3072": true}}
	const podUID = "0b0f8e2a-1111-4c3e-9e49-3b1c8a6d2f10"
	for _, tc := range []struct {
		keyType string
		mutate  func(*Request)
		denied  string
	}{
		{keyType: "ED25519"},
		{keyType: "ECDSAP256"},
		{keyType: "ECDSAP384"},
		{keyType: "RSA3072"},
		{keyType: "ECDSAP521", denied: certificatesv1.PodCertificateRequestConditionUnsupportedKeyType},
		{keyType: "ED25519", mutate: func(r *Request) { r.PodUID = "another-pod" }, denied: "InvalidProofOfPossession"},
		{keyType: "ECDSAP256", mutate: func(r *Request) { r.ProofOfPossession[len(r.ProofOfPossession)-1] ^= 1 }, denied: "InvalidProofOfPossession"},
		{keyType: "RSA3072", mutate: func(r *Request) { r.ProofOfPossession = nil }, denied: "InvalidProofOfPossession"},
		{keyType: "ED25519", mutate: func(r *Request) { _, r.StubPKCS10Request, _ = podcert.GenerateKeyAndProof("ED25519") }, denied: "InvalidProofOfPossession"},
		{keyType: "ED25519", mutate: func(r *Request) { r.PKIXPublicKey = []byte("garbage") }, denied: "InvalidProofOfPossession"},
	} {
		key, _, err := podcert.GenerateKeyAndProof(tc.keyType)
		if err != nil {
			t.Fatal(err)
		}
		pkix, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Namespace: "ns", ServiceAccountName: "sa", PodUID: podUID, PKIXPublicKey: pkix, ProofOfPossession: proof(t, key, podUID)}
		if tc.mutate != nil {
			tc.mutate(&req)
		}
		issued, err := Sign(&CA{Cert: ca.Cert, Key: ca.Key}, req, policy, now)
		if tc.denied != "" {
			var d *Denial
			if !errors.As(err, &d) || d.Reason != tc.denied {
				t.Errorf("%s: want denial %s, got %v", tc.keyType, tc.denied, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.keyType, err)
		}
		block, _ := pem.Decode([]byte(issued.Chain))
		leaf, _ := x509.ParseCertificate(block.Bytes)
		if !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
			t.Errorf("%s: the leaf certifies another key", tc.keyType)
		}
		if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
			t.Errorf("%s: %v", tc.keyType, err)
		}
	}
}

func TestSignBounds(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ca, _ := podcert.NewCA("ca", now, 3*time.Hour)
	_, stub, _ := podcert.GenerateKeyAndProof("ECDSAP256")
	policy := Policy{MaxLifetime: 24 * time.Hour, Backdate: time.Minute}
	for name, tc := range map[string]struct {
		bound time.Time
		want  time.Time
	}{
		"no bound: the CA's end":        {want: ca.Cert.NotAfter},
		"terminating pod: its bound":    {bound: now.Add(100 * time.Minute), want: now.Add(100 * time.Minute)},
		"short bound: the 1h API floor": {bound: now.Add(time.Minute), want: now.Add(59 * time.Minute)},
	} {
		issued, err := Sign(&CA{Cert: ca.Cert, Key: ca.Key}, Request{Namespace: "n", ServiceAccountName: "s", PodUID: "u", StubPKCS10Request: stub, NotAfterBound: tc.bound}, policy, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !issued.NotAfter.Equal(tc.want) || issued.NotAfter.Sub(issued.NotBefore) < time.Hour ||
			issued.BeginRefreshAt.Before(issued.NotBefore.Add(10*time.Minute)) || issued.BeginRefreshAt.After(issued.NotAfter.Add(-10*time.Minute)) {
			t.Errorf("%s: %+v, want notAfter %v", name, issued, tc.want)
		}
	}
}

// TestValidityRefreshAndBackdate: beginRefreshAt lies RefreshFraction into the lifetime
// and notBefore Backdate before the signing, both kept inside the API's rules.
func TestValidityRefreshAndBackdate(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ca, _ := podcert.NewCA("ca", now.Add(-time.Hour), 48*time.Hour)
	hour := int32(3600)
	for name, tc := range map[string]struct {
		policy                          Policy
		maxExpiration                   *int32
		wantNotBefore, wantBeginRefresh time.Time
	}{
		"defaults: two thirds, signed now": {policy: Policy{MaxLifetime: 24 * time.Hour},
			wantNotBefore: now, wantBeginRefresh: now.Add(16 * time.Hour)},
		"a quarter, a minute back": {policy: Policy{MaxLifetime: 24 * time.Hour, RefreshFraction: 0.25, Backdate: time.Minute},
			wantNotBefore: now.Add(-time.Minute), wantBeginRefresh: now.Add(-time.Minute + 6*time.Hour)},
		"earliest: 10m after notBefore": {policy: Policy{MaxLifetime: 24 * time.Hour, RefreshFraction: 0.01, Backdate: MaxBackdate}, maxExpiration: &hour,
			wantNotBefore: now.Add(-MaxBackdate), wantBeginRefresh: now.Add(-MaxBackdate + 10*time.Minute)},
		"latest: 10m before notAfter": {policy: Policy{MaxLifetime: time.Hour, RefreshFraction: 0.99},
			wantNotBefore: now, wantBeginRefresh: now.Add(50 * time.Minute)},
	} {
		v, err := ValidityOf(&CA{Cert: ca.Cert, Key: ca.Key}, Request{MaxExpirationSeconds: tc.maxExpiration}, tc.policy, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !v.NotBefore.Equal(tc.wantNotBefore) || !v.BeginRefreshAt.Equal(tc.wantBeginRefresh) {
			t.Errorf("%s: notBefore %v beginRefreshAt %v, want %v and %v", name, v.NotBefore, v.BeginRefreshAt, tc.wantNotBefore, tc.wantBeginRefresh)
		}
	}
}

// TestLeafInsideItsCAsWindow: a CA that became valid less than the backdate ago signs
// leaves that start when it does, not before (the backdate is cut short), and end no
// later than it does.
func TestLeafInsideItsCAsWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ca, _ := podcert.NewCA("young", now.Add(time.Hour-30*time.Second), 2*time.Hour) // valid from 30s ago
	_, stub, _ := podcert.GenerateKeyAndProof("ECDSAP256")
	policy := Policy{MaxLifetime: 24 * time.Hour, Backdate: MaxBackdate}
	issued, err := Sign(&CA{Cert: ca.Cert, Key: ca.Key}, Request{Namespace: "n", ServiceAccountName: "s", PodUID: "u", StubPKCS10Request: stub}, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(issued.Chain))
	leaf, _ := x509.ParseCertificate(block.Bytes)
	if leaf.NotBefore.Before(ca.Cert.NotBefore) || leaf.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf valid %v–%v outside its CA's %v–%v", leaf.NotBefore, leaf.NotAfter, ca.Cert.NotBefore, ca.Cert.NotAfter)
	}
	if !issued.NotBefore.Equal(ca.Cert.NotBefore) || !issued.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("notBefore %v notAfter %v, want the CA's %v and %v", issued.NotBefore, issued.NotAfter, ca.Cert.NotBefore, ca.Cert.NotAfter)
	}
}

func TestOptionsValidateRefreshAndBackdate(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"fraction 0":        func(o *Options) { o.RefreshFraction = 0 },
		"fraction 1":        func(o *Options) { o.RefreshFraction = 1 },
		"negative backdate": func(o *Options) { o.Backdate = -time.Second },
		"backdate past 4m":  func(o *Options) { o.Backdate = MaxBackdate + time.Second },
	} {
		o := DefaultOptions()
		mutate(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := DefaultOptions()
	o.RefreshFraction, o.Backdate = 0.01, MaxBackdate
	if err := o.Validate(); err != nil {
		t.Errorf("the earliest refresh: %v", err)
	}
}

// TestOptionsRefuseATrustDomainSPIFFEDoesNot: the trust domain is checked by go-spiffe's
// own rule (spiffeid.TrustDomainFromString) and must be the name alone; the SPIFFE ID the
// signer then writes parses with go-spiffe.
func TestOptionsRefuseATrustDomainSPIFFEDoesNot(t *testing.T) {
	// The last two are SPIFFE trust domains, but no label value (k8s.spiffe.io/*-trust-domain
	// labels on the bundle): longer than 63, or not starting with a letter or digit.
	for _, td := range []string{"", "Cluster.Local", "cluster local", "spiffe://cluster.local", "cluster.local/ns", "héllo.example", "cluster.local:8443",
		strings.Repeat("a", 64), "_cluster.local"} {
		o := DefaultOptions()
		o.TrustDomain = td
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), "--podcertificate-signer-trust-domain") || !strings.Contains(err.Error(), "is not a SPIFFE trust domain") {
			t.Errorf("%q: %v", td, err)
		}
	}
	for _, td := range []string{"cluster.local", "prod_eu-1.example.org"} {
		o := DefaultOptions()
		o.TrustDomain = td
		if err := o.Validate(); err != nil {
			t.Errorf("%q refused: %v", td, err)
		}
		if _, err := spiffeid.FromString("spiffe://" + td + "/ns/default/sa/workload"); err != nil {
			t.Errorf("the SPIFFE ID of %q does not parse: %v", td, err)
		}
	}
}
