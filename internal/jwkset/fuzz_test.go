package jwkset

import (
	"bytes"
	"errors"
	"testing"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// FuzzParseChain: any tls.crt content either yields a key whose published document
// parses back to the same kid and bytes, or an *InputError — never a panic or another error.
// Run it longer with: go test ./internal/jwkset -run '^$' -fuzz FuzzParseChain -fuzztime 3m
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
