package checksum

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// TestSecretPemSHAIsTengines: each of Tengine-Ingress's rules for keeping a Secret
// (store/backend_ssl.go getPemCertificate; net/ssl CreateSSLCert, CreateCACert,
// CheckCACert, ConfigureCRL), with the PemSHA it counts with, or the reason it is left out.
func TestSecretPemSHAIsTengines(t *testing.T) {
	chain := newTestChain(t, testcerts.P256)
	other := newTestChain(t, testcerts.P256)
	ed := newTestChain(t, testcerts.Ed25519)
	leafSHA, err := PemSHA(chain.PEM())
	if err != nil {
		t.Fatal(err)
	}
	edSHA, _ := PemSHA(ed.PEM())
	ca := testcerts.CertPEM(chain.CA)
	crl := newCRL(t)
	keyBlock := chain.KeyPEM()
	garbageCert := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")

	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		want   string // the PemSHA; "" with reason "" is a CA-only Secret
		reason string // the reason it is left out
	}{
		{"pair, leaf first", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock}, leafSHA, ""},
		{"pair, leaf only", map[string][]byte{KeyTLSCrt: testcerts.CertPEM(chain.Leaf), KeyTLSKey: keyBlock}, leafSHA, ""},
		{"pair, Ed25519", map[string][]byte{KeyTLSCrt: ed.PEM(), KeyTLSKey: ed.KeyPEM()}, edSHA, ""},
		{"pair with a valid ca.crt", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACrt: ca}, leafSHA, ""},
		{"pair with a valid ca.crt and ca.crl", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACrt: ca, KeyCACRL: crl}, leafSHA, ""},
		{"pair with a ca.crl but no ca.crt: the CRL is not read", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACRL: []byte("junk")}, leafSHA, ""},
		{"tls.key missing", map[string][]byte{KeyTLSCrt: chain.PEM()}, "", tenginev1alpha1.ReasonNoKeyPair},
		{"tls.key of another certificate", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: other.KeyPEM()}, "", tenginev1alpha1.ReasonKeyMismatch},
		{"tls.key empty", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: {}}, "", tenginev1alpha1.ReasonKeyMismatch},
		{"tls.key garbage", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: []byte("garbage")}, "", tenginev1alpha1.ReasonKeyMismatch},
		{"first block is a key, not a certificate", map[string][]byte{KeyTLSCrt: append(append([]byte{}, keyBlock...), chain.PEM()...), KeyTLSKey: keyBlock}, "", tenginev1alpha1.ReasonInvalidTLSCrt},
		{"first block is the CA's: its key is not the pair's", map[string][]byte{KeyTLSCrt: append(testcerts.CertPEM(chain.CA), testcerts.CertPEM(chain.Leaf)...), KeyTLSKey: keyBlock}, "", tenginev1alpha1.ReasonKeyMismatch},
		{"tls.crt not PEM", map[string][]byte{KeyTLSCrt: []byte("garbage"), KeyTLSKey: keyBlock}, "", tenginev1alpha1.ReasonInvalidTLSCrt},
		{"tls.crt a certificate block that does not parse", map[string][]byte{KeyTLSCrt: garbageCert, KeyTLSKey: keyBlock}, "", tenginev1alpha1.ReasonInvalidTLSCrt},
		{"pair with a ca.crt that does not parse", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACrt: garbageCert}, "", tenginev1alpha1.ReasonInvalidCA},
		{"pair with a ca.crt holding a key", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACrt: keyBlock}, "", tenginev1alpha1.ReasonInvalidCA},
		{"pair with a bad ca.crl", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: keyBlock, KeyCACrt: ca, KeyCACRL: []byte("junk")}, "", tenginev1alpha1.ReasonInvalidCRL},
		{"CA-only", map[string][]byte{KeyCACrt: ca}, "", ""},
		{"CA-only with a CRL", map[string][]byte{KeyCACrt: ca, KeyCACRL: crl}, "", ""},
		{"CA-only with a tls.crt but no tls.key", map[string][]byte{KeyTLSCrt: chain.PEM(), KeyCACrt: ca}, "", ""},
		{"CA-only, ca.crt garbage", map[string][]byte{KeyCACrt: []byte("garbage")}, "", tenginev1alpha1.ReasonInvalidCA},
		{"CA-only, bad CRL", map[string][]byte{KeyCACrt: ca, KeyCACRL: testcerts.CertPEM(chain.CA)}, "", tenginev1alpha1.ReasonInvalidCRL},
		{"nothing Tengine reads", map[string][]byte{"auth": []byte("user:pass")}, "", tenginev1alpha1.ReasonNoKeyPair},
		{"no data", nil, "", tenginev1alpha1.ReasonNoKeyPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SecretPemSHA(tc.data)
			if tc.reason != "" {
				if !isReason(err, tc.reason) {
					t.Fatalf("= %q, %v; want left out as %s", got, err, tc.reason)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	// The ID of a CA-only Secret ends in "-", as Tengine-Ingress prints it ("%d-%d-%s").
	id, err := SecretID("trust-bundle-7", map[string]string{DefaultVersionAnnotation: "2"}, DefaultVersionAnnotation, map[string][]byte{KeyCACrt: ca})
	if err != nil || id != "7-2-" {
		t.Errorf("CA-only SecretID = %q, %v; want 7-2-", id, err)
	}
}

func newTestChain(t *testing.T, kt testcerts.KeyType) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := testcerts.NewChain(key, "example.com", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newCRL is an empty X509 CRL from a CA allowed to sign CRLs.
func newCRL(t *testing.T) []byte {
	t.Helper()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "CRL CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	issuer, _ := x509.ParseCertificate(der)
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour)}, issuer, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: crl})
}
