package podcertsigner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"testing"
)

// FuzzPublicKey: whatever a PodCertificateRequest carries as its stub PKCS#10 request,
// PKIX public key and proof of possession, the signer either returns a public key of a
// type it names, or a Denial with a reason; never a panic. A key it returns from the PKIX
// form is exactly the one the request's bytes encode.
func FuzzPublicKey(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	const uid = "7d9f1c2e-0000-4000-8000-000000000001"
	digest := sha256.Sum256([]byte(uid))
	proof, _ := ecdsa.SignASN1(rand.Reader, key, digest[:])
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	f.Add([]byte(nil), der, proof, uid)
	f.Add(csr, []byte(nil), []byte(nil), uid)
	f.Add(csr, der, proof, uid)
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00}, []byte{0x30}, []byte{0}, "")
	f.Fuzz(func(t *testing.T, stub, pkix, pop []byte, podUID string) {
		req := Request{PodUID: podUID, StubPKCS10Request: stub, PKIXPublicKey: pkix, ProofOfPossession: pop}
		pub, denial := req.PublicKey()
		if denial != nil {
			if pub != nil || denial.Reason == "" || denial.Message == "" {
				t.Fatalf("denial %+v with key %T", denial, pub)
			}
			return
		}
		if KeyTypeOf(pub) == "" {
			t.Fatalf("accepted a key of no known type: %T", pub)
		}
		if len(pkix) != 0 {
			again, err := x509.ParsePKIXPublicKey(pkix)
			if err != nil {
				t.Fatalf("accepted a pkixPublicKey that does not parse: %v", err)
			}
			if a, b := mustMarshal(t, again), mustMarshal(t, pub); string(a) != string(b) {
				t.Fatal("the accepted key is not the one the request encodes")
			}
		}
	})
}

func mustMarshal(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
