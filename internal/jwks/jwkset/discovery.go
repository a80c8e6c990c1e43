package jwkset

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// DiscoveryKey is the ConfigMap data key and file name of the OpenID discovery document.
const DiscoveryKey = "openid-configuration"

// discoveryDocument is the OpenID Provider Metadata (OpenID Connect Discovery 1.0,
// section 3) a relying party needs to verify tokens; a struct keeps the output's field
// order fixed.
type discoveryDocument struct {
	Issuer                           string   `json:"issuer"`
	JWKSURI                          string   `json:"jwks_uri"`
	ResponseTypesSupported           []string `json:"response_types_supported"`
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
}

// Discovery renders the discovery document for issuer and the published set. Equal
// input gives byte-identical output.
//
// The document's issuer is issuer exactly as configured (a trailing slash included):
// relying parties compare the two byte for byte (OpenID Connect Discovery 1.0, 4.3).
// jwks_uri is the issuer's own URL plus /jwks.json, never a path of trustplane's: the
// issuer is whatever a relying party reaches through its proxy, so the set is reached
// the same way, with either proxy layout in docs/jwks.md.
func Discovery(issuer string, set []byte) ([]byte, error) {
	if err := validateIssuer(issuer); err != nil {
		return nil, err
	}
	keys, err := Unmarshal(set)
	if err != nil {
		return nil, fmt.Errorf("reading the published JWK Set: %w", err)
	}
	algs := []string{}
	seen := map[string]bool{}
	for _, k := range keys {
		if k.Algorithm != "" && !seen[k.Algorithm] {
			seen[k.Algorithm] = true
			algs = append(algs, k.Algorithm)
		}
	}
	out, err := json.Marshal(discoveryDocument{
		Issuer:                           issuer,
		JWKSURI:                          strings.TrimSuffix(issuer, "/") + "/" + DocumentKey,
		ResponseTypesSupported:           []string{"id_token"},
		SubjectTypesSupported:            []string{"public"},
		IDTokenSigningAlgValuesSupported: algs,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the discovery document: %w", err)
	}
	return out, nil
}

// validateIssuer applies OpenID Connect Discovery 1.0, 3 (issuer): an https URL with a
// host and no query or fragment, which jwks_uri can be appended to.
func validateIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil {
		return fmt.Errorf("issuer %q: %w", issuer, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(issuer, "#") {
		return fmt.Errorf("issuer %q must be an https URL with a host and no user, query or fragment", issuer)
	}
	return nil
}
