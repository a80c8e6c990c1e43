package jwkset

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// TestDiscoveryDocument checks what a relying party reads: the issuer byte for byte as
// configured, jwks_uri under the issuer (never a path appended twice), and the key
// algorithms of the set in its order, each once.
func TestDiscoveryDocument(t *testing.T) {
	ec1, rsa, ec2 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.RSA2048)), mustParse(t, newChain(t, testcerts.P256))
	retired := now.Add(-time.Hour)
	set, err := Marshal([]PublishedKey{{Key: ec1}, {Key: rsa, RetiredAt: &retired}, {Key: ec2, RetiredAt: &retired}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ issuer, jwksURI string }{
		{"https://idp.example", "https://idp.example/jwks.json"},
		{"https://idp.example/", "https://idp.example/jwks.json"},
		{"https://idp.example:8443/tenants/a", "https://idp.example:8443/tenants/a/jwks.json"},
		{"https://idp.example/tenants/a/", "https://idp.example/tenants/a/jwks.json"},
		// The issuer of trustplane's canonical route: its path is not added again.
		{"https://idp.example/default/issuer", "https://idp.example/default/issuer/jwks.json"},
	} {
		raw, err := Discovery(tc.issuer, set)
		if err != nil {
			t.Fatalf("%s: %v", tc.issuer, err)
		}
		var doc struct {
			Issuer        string   `json:"issuer"`
			JWKSURI       string   `json:"jwks_uri"`
			Algs          []string `json:"id_token_signing_alg_values_supported"`
			ResponseTypes []string `json:"response_types_supported"`
			SubjectTypes  []string `json:"subject_types_supported"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Issuer != tc.issuer {
			t.Errorf("issuer %q, want %q byte for byte", doc.Issuer, tc.issuer)
		}
		if doc.JWKSURI != tc.jwksURI {
			t.Errorf("%s: jwks_uri %q, want %q", tc.issuer, doc.JWKSURI, tc.jwksURI)
		}
		if len(doc.Algs) != 2 || doc.Algs[0] != "ES256" || doc.Algs[1] != "RS256" {
			t.Errorf("%s: algorithms %v, want [ES256 RS256]", tc.issuer, doc.Algs)
		}
		if len(doc.ResponseTypes) != 1 || doc.ResponseTypes[0] != "id_token" || len(doc.SubjectTypes) != 1 || doc.SubjectTypes[0] != "public" {
			t.Errorf("%s: response types %v, subject types %v", tc.issuer, doc.ResponseTypes, doc.SubjectTypes)
		}
		again, _ := Discovery(tc.issuer, set)
		if !bytes.Equal(raw, again) {
			t.Errorf("%s: two renderings differ:\n%s\n%s", tc.issuer, raw, again)
		}
	}
}

func TestDiscoveryRefusesWhatCannotBeAnIssuer(t *testing.T) {
	set, err := Marshal([]PublishedKey{{Key: mustParse(t, newChain(t, testcerts.P256))}})
	if err != nil {
		t.Fatal(err)
	}
	for _, issuer := range []string{"", "http://idp.example", "https://", "https://idp.example/?tenant=a", "https://idp.example/#a", "https://user@idp.example", "idp.example/a"} {
		if doc, err := Discovery(issuer, set); err == nil {
			t.Errorf("issuer %q accepted: %s", issuer, doc)
		}
	}
	if doc, err := Discovery("https://idp.example", []byte(`{"keys":[{"kty":"EC"}]}`)); err == nil {
		t.Errorf("a set that does not parse gave %s", doc)
	}
}
