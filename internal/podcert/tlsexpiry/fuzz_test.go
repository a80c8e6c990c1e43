package tlsexpiry

import (
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// FuzzDerive: whatever a tenant's tls.crt holds, the controller reads it without a panic:
// above the cap it is only hashed (too-large), else its first certificate's validity or
// "invalid"; the hash and size always describe the input.
func FuzzDerive(f *testing.F) {
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "site.example", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(chain.PEM())
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" + string(chain.PEM())))
	f.Add([]byte{})
	const maxBytes = 4096
	f.Fuzz(func(t *testing.T, crt []byte) {
		c := derive(crt, maxBytes)
		if c.Bytes != len(crt) || len(c.SHA256) != 64 {
			t.Fatalf("size %d / hash %q for %d bytes", c.Bytes, c.SHA256, len(crt))
		}
		switch {
		case len(crt) > maxBytes:
			if c.Problem != problemTooLarge || !c.NotAfter.IsZero() {
				t.Fatalf("%d bytes over the cap: %+v", len(crt), c)
			}
		case c.Problem == "":
			if c.NotAfter.IsZero() && c.NotBefore.IsZero() {
				t.Fatalf("parsed with no validity: %+v", c)
			}
		case c.Problem != problemInvalid:
			t.Fatalf("problem %q", c.Problem)
		}
	})
}
