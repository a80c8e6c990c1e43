package jwkset

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// FuzzParseChain: any tls.crt content either yields a key whose published document
// parses back to the same kid and bytes, or an *InputError — never a panic or another error.
// Run it longer with: go test ./internal/jwks/jwkset -run '^$' -fuzz FuzzParseChain -fuzztime 3m
func FuzzParseChain(f *testing.F) {
	for _, kt := range []testcerts.KeyType{testcerts.RSA2048, testcerts.P256, testcerts.P521, testcerts.Ed25519} {
		f.Add(newChain(f, kt).PEM())
	}
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := ParseChain(data, "", now)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Reason == "" || ie.Message == "" {
				t.Fatalf("error is not a classified input error: %#v", err)
			}
			return
		}
		doc, err := Marshal([]PublishedKey{{Key: key}})
		if err != nil {
			t.Fatalf("parsed key does not marshal: %v", err)
		}
		back, err := Restore(doc, nil)
		if err != nil || len(back) != 1 || back[0].KeyID() != key.KeyID() {
			t.Fatalf("round trip: %v", err)
		}
		again, err := Marshal(back)
		if err != nil || !bytes.Equal(doc, again) {
			t.Fatalf("document not stable through a round trip: %v", err)
		}
	})
}

// FuzzRestore: a published JWK Set read back from its ConfigMap (which a tenant can edit),
// with its retirement record, is either refused with an error or restored into keys that
// publish again, to a document that restores to the same keys.
func FuzzRestore(f *testing.F) {
	key, err := ParseChain(newChain(f, testcerts.P256).PEM(), "", now)
	if err != nil {
		f.Fatal(err)
	}
	retired := now.Add(-time.Hour)
	doc, err := Marshal([]PublishedKey{{Key: key}, {Key: key, RetiredAt: &retired}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc, EncodeRetirements([]PublishedKey{{Key: key, RetiredAt: &retired}}))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`), `{"kid":"not a time"}`)
	f.Add([]byte(`{"keys":null}`), "")
	f.Fuzz(func(t *testing.T, doc []byte, record string) {
		retirements, err := DecodeRetirements(record)
		if err != nil {
			return
		}
		keys, err := Restore(doc, retirements)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("error is not a classified input error: %#v", err)
			}
			return
		}
		again, err := Marshal(keys)
		if err != nil {
			return // a key that parsed but does not publish (go-jose refuses it): refused later
		}
		back, err := Restore(again, retirements)
		if err != nil || len(back) != len(keys) {
			t.Fatalf("a restored set does not restore again: %v", err)
		}
		for i := range back {
			if back[i].KeyID() != keys[i].KeyID() {
				t.Fatalf("key %d: kid %q became %q", i, keys[i].KeyID(), back[i].KeyID())
			}
		}
	})
}

// A tls.crt of more certificates than a chain may have is refused before the rest is
// parsed, naming the limit; a chain of exactly the limit is read.
func TestChainsAreCappedInCertificates(t *testing.T) {
	one := testcerts.CertPEM(newChain(t, testcerts.P256).Leaf)
	if _, err := ParseChain(bytes.Repeat(one, MaxChainCertificates), "", now); err != nil {
		t.Fatalf("a chain of %d: %v", MaxChainCertificates, err)
	}
	_, err := ParseChain(bytes.Repeat(one, MaxChainCertificates+1), "", now)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Reason != "CertificateTooLarge" || !strings.Contains(ie.Message, "more than 16 certificates") {
		t.Fatalf("a chain of %d: %v", MaxChainCertificates+1, err)
	}
}
