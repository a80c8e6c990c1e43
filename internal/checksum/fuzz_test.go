package checksum

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// FuzzSecretID: whatever a tenant writes as a Secret's name, version annotation and TLS
// data, its ID is either "<ID>-<Version>-<PemSHA>" built from the parts (the same as the
// split computation the control plane makes, SecretIDWithPemSHA over SecretPemSHA) or a
// *LeftOut with a reason, and an Ingress's is "<ID>-<Version>" alike.
// Run longer: make fuzz FUZZTIME=1m.
func FuzzSecretID(f *testing.F) {
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "shop.example", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("shop-example-027", "3", chain.PEM(), chain.KeyPEM(), []byte(nil))
	f.Add("ca-7", "1", []byte(nil), []byte(nil), testcerts.CertPEM(chain.CA))
	f.Add("x-", "0", []byte("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----"), []byte("junk"), []byte("junk"))
	f.Add("a-+1", "+2", []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, name, version string, crt, key, ca []byte) {
		annotations := map[string]string{DefaultVersionAnnotation: version}
		data := map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca}
		id, err := SecretID(name, annotations, DefaultVersionAnnotation, data)
		if err != nil {
			var lo *LeftOut
			if !errors.As(err, &lo) || lo.Reason == "" {
				t.Fatalf("not a classified LeftOut: %#v", err)
			}
			return
		}
		sha, err := SecretPemSHA(data)
		if err != nil {
			t.Fatalf("SecretID succeeded and SecretPemSHA failed: %v", err)
		}
		prefix, err := IngressID(name, annotations, DefaultVersionAnnotation)
		if err != nil || id != prefix+"-"+sha {
			t.Fatalf("ID %q, want %q-%q (%v)", id, prefix, sha, err)
		}
		if strings.Count(prefix, "-") != 1 {
			t.Fatalf("ingress ID %q is not <ID>-<Version>", prefix)
		}
	})
}

// FuzzParseScope: a scope annotation read from a checksum object either parses into a
// scope whose string parses back to the same scope, or is refused.
func FuzzParseScope(f *testing.F) {
	f.Add(NewScope([]string{"a", "b"}, DefaultVersionAnnotation).String())
	f.Add(NewScope(nil, "x/y").String())
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseScope(raw)
		if err != nil {
			return
		}
		again, err := ParseScope(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("scope %q → %q → %q (%v)", raw, s.String(), again.String(), err)
		}
	})
}
