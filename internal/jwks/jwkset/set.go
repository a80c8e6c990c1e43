package jwkset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// PublishedKey is a key in a published set, with its rotation state.
type PublishedKey struct {
	Key
	// RetiredAt is when the key stopped being the current key; nil for the current key.
	RetiredAt *time.Time
}

// Policy is how keys leave the set.
type Policy struct {
	// KeepOldKeys keeps retired keys until OldKeysTTL after retirement (rolling
	// strategy with keepOldKeys). Without it the set holds only the current key.
	KeepOldKeys bool
	// OldKeysTTL is how long a retired key stays.
	OldKeysTTL time.Duration
	// MaxKeys caps the set, the current key included; the keys retired longest ago go
	// first. Zero or less means no cap.
	MaxKeys int
	// Signing is the kid of the key signers use (spec.signingSecret), when it is not the
	// current key yet: it stays in the set, second, never retired, never removed (not by
	// TTL, MaxKeys or size) until the current key is promoted; its TTL starts then.
	Signing string
}

// MaxDocumentBytes is the most a published JWK Set may take. A ConfigMap holds at most
// 1 MiB (the API server's limit on its data, and etcd's on a request); this leaves room
// for the discovery document, the retirement record and the object's metadata, so that
// rotations can never make the ConfigMap too large to write.
const MaxDocumentBytes = 900 * 1024

// MaxCertificateBytes is the largest tls.crt that is parsed and published. Real chains
// are a few KiB; the parsed chain is kept in memory per JWKSConfig (as x5c), so a tenant's
// megabyte-sized tls.crt must not be.
const MaxCertificateBytes = 64 * 1024

// MaxChainCertificates is the most certificates a tls.crt may hold: a leaf and its
// intermediates; more is refused (CertificateTooLarge) before the rest is parsed.
const MaxChainCertificates = 16

// Plan computes the next published set from the current key and the previous set.
//
//   - The current key is always first and never removed. When it is already published
//     (same kid: a renewed certificate for the same key) its x5c/x5t are updated in place.
//   - With KeepOldKeys, every other key is retired at the moment it stops being current
//     (now, unless it was retired before) and removed once OldKeysTTL has passed since
//     then, or earlier when more than MaxKeys keys would be kept (the oldest retirements
//     go first). Without it, the set is replaced by the current key.
//
// nextRemoval is when the earliest kept retired key is due to go (zero if none), so the
// caller can come back on time even if nothing else changes.
func Plan(current Key, previous []PublishedKey, p Policy, now time.Time) (next []PublishedKey, nextRemoval time.Time) {
	next = []PublishedKey{{Key: current}}
	seen := map[string]bool{current.KeyID(): true}
	if i := slices.IndexFunc(previous, func(k PublishedKey) bool { return k.KeyID() == p.Signing }); p.Signing != current.KeyID() && i >= 0 {
		signing := previous[i]
		signing.RetiredAt = nil
		next = append(next, signing)
		seen[p.Signing] = true
	}
	if !p.KeepOldKeys {
		return next, time.Time{}
	}
	var retired []PublishedKey
	for _, k := range previous {
		if seen[k.KeyID()] {
			continue
		}
		seen[k.KeyID()] = true
		retiredAt := now
		if k.RetiredAt != nil {
			retiredAt = *k.RetiredAt
		}
		removeAt := retiredAt.Add(p.OldKeysTTL)
		if !now.Before(removeAt) {
			continue
		}
		k.RetiredAt = &retiredAt
		retired = append(retired, k)
	}
	// Most recently retired first. Keys retired within the same second keep the order of
	// the previous set, which already lists the newer retirement first: the output is
	// deterministic, and a cap removes the key that really is oldest.
	sort.SliceStable(retired, func(i, j int) bool {
		return retired[i].RetiredAt.After(*retired[j].RetiredAt)
	})
	if keep := max(p.MaxKeys-len(next), 0); p.MaxKeys > 0 && len(retired) > keep {
		retired = retired[:keep] // the oldest retirements leave first
	}
	return append(next, retired...), EarliestRemoval(retired, p.OldKeysTTL)
}

// Kept is how many leading keys of a planned set MarshalWithin must never leave out: the
// current key, and the signing key when it is not the current one (Plan puts it second).
func Kept(keys []PublishedKey) int {
	if len(keys) > 1 && keys[1].RetiredAt == nil {
		return 2
	}
	return 1
}

// EarliestRemoval is when the first retired key of keys is due to go (zero if none).
func EarliestRemoval(keys []PublishedKey, ttl time.Duration) time.Time {
	var first time.Time
	for _, k := range keys {
		if k.RetiredAt == nil {
			continue
		}
		if at := k.RetiredAt.Add(ttl); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// MarshalWithin renders keys (as Plan orders them: current first, the signing key, then
// newest retirement first) as a JWK Set of at most maxBytes, leaving out the keys retired
// longest ago until it fits. It returns the keys that made it in. The current and the
// signing key are never left out: if they alone are too large, that is an InputError
// (reason SetTooLarge).
func MarshalWithin(keys []PublishedKey, maxBytes int) ([]PublishedKey, []byte, error) {
	for n := len(keys); n >= min(Kept(keys), len(keys)) && n > 0; n-- {
		doc, err := Marshal(keys[:n])
		if err != nil {
			return nil, nil, err
		}
		if len(doc) <= maxBytes {
			return keys[:n], doc, nil
		}
	}
	return nil, nil, inputErrorf(jwksv1alpha1.ReasonSetTooLarge, "the current certificate chain (and the one being signed with) alone make a JWK Set of more than %d bytes; publish a shorter chain", maxBytes)
}

// Marshal renders keys as a JWK Set document. Equal input gives byte-identical output.
func Marshal(keys []PublishedKey) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(keys))}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.JWK)
	}
	out, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("encoding JWK Set: %w", err)
	}
	// Check what consumers will parse before it is published (seed phase 3, step 4).
	if _, err := Unmarshal(out); err != nil {
		return nil, fmt.Errorf("generated JWK Set does not parse back: %w", err)
	}
	return out, nil
}

// Unmarshal parses a published JWK Set. Each key must be a valid public key; its
// certificate chain (x5c) is verified against the key by go-jose.
func Unmarshal(data []byte) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&set); err != nil {
		return nil, err
	}
	for i, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() {
			return nil, fmt.Errorf("key %d (kid %q) is not a valid public key", i, k.KeyID)
		}
	}
	return set.Keys, nil
}

// Restore rebuilds a published set from its document and the retirement times recorded
// beside it (see EncodeRetirements). A non-current key with no recorded time counts as
// retired now: losing the record can only keep a key longer, never drop it early.
func Restore(doc []byte, retirements map[string]time.Time) ([]PublishedKey, error) {
	jwks, err := Unmarshal(doc)
	if err != nil {
		return nil, &InputError{Reason: jwksv1alpha1.ReasonInvalidPublished, Message: "the published JWK Set does not parse: " + err.Error()}
	}
	keys := make([]PublishedKey, 0, len(jwks))
	for _, j := range jwks {
		k := PublishedKey{Key: Key{JWK: j}}
		if len(j.Certificates) > 0 {
			k.NotAfter = j.Certificates[0].NotAfter
		}
		if t, ok := retirements[j.KeyID]; ok {
			k.RetiredAt = &t
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// EncodeRetirements records the retirement times of a set (kid → RFC 3339), to be kept
// next to the set so that rotation state survives restarts.
func EncodeRetirements(keys []PublishedKey) string {
	m := map[string]string{}
	for _, k := range keys {
		if k.RetiredAt != nil {
			m[k.KeyID()] = k.RetiredAt.UTC().Format(time.RFC3339)
		}
	}
	out, _ := json.Marshal(m) // map keys are sorted: deterministic
	return string(out)
}

// DecodeRetirements parses EncodeRetirements' output; empty input is no record.
func DecodeRetirements(s string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if s == "" {
		return out, nil
	}
	var raw map[string]string
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("retirement record: %w", err)
	}
	for kid, v := range raw {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, fmt.Errorf("retirement record for kid %q: %w", kid, err)
		}
		out[kid] = t
	}
	return out, nil
}

// MaxRecordedJWKBytes is the most a key's recorded JWK (PublicJWK) takes: a usual chain
// fits with its x5c; a longer one is recorded without it, so twenty keys stay well within
// what an object's status can hold.
const MaxRecordedJWKBytes = 8 * 1024

// PublicJWK is the key's public JWK as JSON, to be recorded in status: as published, or,
// when that is over MaxRecordedJWKBytes, without its certificate chain (x5c) and
// thumbprints. "" if it cannot be encoded.
func PublicJWK(k Key) string {
	if out, err := json.Marshal(k.JWK); err == nil && len(out) <= MaxRecordedJWKBytes {
		return string(out)
	}
	bare := jose.JSONWebKey{Key: k.JWK.Key, KeyID: k.JWK.KeyID, Algorithm: k.JWK.Algorithm, Use: k.JWK.Use}
	out, err := json.Marshal(bare)
	if err != nil {
		return ""
	}
	return string(out)
}

// ParsePublicJWK reads PublicJWK's output back, checking that it is a valid public key
// with the kid it is recorded under.
func ParsePublicJWK(kid, data string) (Key, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(data)); err != nil {
		return Key{}, fmt.Errorf("recorded key %s: %w", kid, err)
	}
	if !k.Valid() || !k.IsPublic() || k.KeyID != kid {
		return Key{}, fmt.Errorf("recorded key %s is not a valid public key with that kid", kid)
	}
	key := Key{JWK: k}
	if len(k.Certificates) > 0 {
		key.NotAfter = k.Certificates[0].NotAfter
	}
	return key, nil
}
