package jwkset

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
)

func kids(keys []PublishedKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.KeyID())
	}
	return out
}

func mustParse(t *testing.T, c testcerts.Chain) Key {
	t.Helper()
	k, err := ParseChain(c.PEM(), "", now)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// roundTrip publishes keys and reads them back as the controller does on its next
// reconcile: from the document and the retirement record, nothing in memory.
func roundTrip(t *testing.T, keys []PublishedKey) []PublishedKey {
	t.Helper()
	doc, err := Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	ret, err := DecodeRetirements(EncodeRetirements(keys))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Restore(doc, ret)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRollingRotationTimeline is the seed's T0..T3 diagram.
func TestRollingRotationTimeline(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: 30 * 24 * time.Hour}
	key1, key2 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.RSA2048))

	t0 := now
	set, due := Plan(key1, nil, policy, t0)
	if got := kids(set); len(got) != 1 || got[0] != key1.KeyID() || !due.IsZero() {
		t.Fatalf("T0: %v due %v", got, due)
	}

	t1 := t0.Add(time.Hour)
	set, due = Plan(key2, roundTrip(t, set), policy, t1)
	if got := kids(set); len(got) != 2 || got[0] != key2.KeyID() || got[1] != key1.KeyID() {
		t.Fatalf("T1: want [key2 key1], got %v", got)
	}
	if set[1].RetiredAt == nil || !set[1].RetiredAt.Equal(t1) {
		t.Errorf("key1 retiredAt = %v, want T1", set[1].RetiredAt)
	}
	if want := t1.Add(policy.OldKeysTTL); !due.Equal(want) {
		t.Errorf("next removal = %v, want %v (TTL counts from retirement)", due, want)
	}

	// T2: still inside the TTL; restored from the ConfigMap, retirement time kept.
	t2 := t1.Add(policy.OldKeysTTL - time.Second)
	set, _ = Plan(key2, roundTrip(t, set), policy, t2)
	if got := kids(set); len(got) != 2 {
		t.Fatalf("T2: key1 removed early: %v", got)
	}
	if !set[1].RetiredAt.Equal(t1) {
		t.Errorf("T2: retiredAt moved to %v", set[1].RetiredAt)
	}

	// T3: TTL over: only the new key.
	t3 := t1.Add(policy.OldKeysTTL)
	set, due = Plan(key2, roundTrip(t, set), policy, t3)
	if got := kids(set); len(got) != 1 || got[0] != key2.KeyID() || !due.IsZero() {
		t.Fatalf("T3: %v due %v", got, due)
	}
}

func TestReplacingStrategies(t *testing.T) {
	key1, key2 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.P384))
	prev, _ := Plan(key1, nil, Policy{}, now)
	set, due := Plan(key2, roundTrip(t, prev), Policy{KeepOldKeys: false}, now)
	if got := kids(set); len(got) != 1 || got[0] != key2.KeyID() || !due.IsZero() {
		t.Fatalf("replace: %v", got)
	}
}

// TestRenewalWithSameKeyKeepsKid: cert-manager renews without rotating the private key.
func TestRenewalWithSameKeyKeepsKid(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: time.Hour}
	first := newChain(t, testcerts.P256)
	renewed, err := testcerts.NewChain(first.LeafKey, "issuer.example", now, now.Add(180*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := mustParse(t, first), mustParse(t, renewed)
	if k1.KeyID() != k2.KeyID() {
		t.Fatal("kid changed for the same public key")
	}
	set, _ := Plan(k1, nil, policy, now)
	set, due := Plan(k2, roundTrip(t, set), policy, now.Add(time.Minute))
	if len(set) != 1 || !due.IsZero() {
		t.Fatalf("renewal added a key: %v", kids(set))
	}
	if !bytes.Equal(set[0].JWK.Certificates[0].Raw, renewed.Leaf.Raw) || !bytes.Equal(set[0].JWK.CertificateThumbprintSHA256, k2.JWK.CertificateThumbprintSHA256) {
		t.Error("x5c/x5t not updated in place")
	}
	if !set[0].NotAfter.Equal(renewed.Leaf.NotAfter) {
		t.Error("notAfter not updated")
	}
}

func TestRetiredKeyBecomingCurrentAgainIsUnretired(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: time.Hour}
	k1, k2 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.P256))
	set, _ := Plan(k1, nil, policy, now)
	set, _ = Plan(k2, roundTrip(t, set), policy, now.Add(time.Minute))
	set, _ = Plan(k1, roundTrip(t, set), policy, now.Add(2*time.Minute))
	if got := kids(set); got[0] != k1.KeyID() || set[0].RetiredAt != nil || set[1].RetiredAt == nil {
		t.Fatalf("rollback: %v", got)
	}
}

// TestUnknownRetirementKeepsKeyLonger: a lost retirement record must not drop keys.
func TestUnknownRetirementKeepsKeyLonger(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: time.Hour}
	k1, k2 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.P256))
	doc, _ := Marshal([]PublishedKey{{Key: k2}, {Key: k1}})
	prev, err := Restore(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(10 * time.Hour)
	set, due := Plan(k2, prev, policy, later)
	if len(set) != 2 || !set[1].RetiredAt.Equal(later) || !due.Equal(later.Add(time.Hour)) {
		t.Fatalf("set %v retired %v due %v", kids(set), set[1].RetiredAt, due)
	}
}

// TestMarshalIsDeterministic: the same previous set gives the same document, and keys
// retired within the same second keep the previous set's order (which lists the newer
// retirement first), so that a cap removes the key that is really the oldest.
func TestMarshalIsDeterministic(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: time.Hour}
	k1, k2, k3 := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.Ed25519)), mustParse(t, newChain(t, testcerts.P384))
	same := now.Add(-time.Minute)
	prev := []PublishedKey{{Key: k2, RetiredAt: &same}, {Key: k1, RetiredAt: &same}}
	a, _ := Plan(k3, prev, policy, now)
	b, _ := Plan(k3, roundTrip(t, prev), policy, now)
	da, _ := Marshal(a)
	db, _ := Marshal(b)
	if !bytes.Equal(da, db) {
		t.Error("the same previous set, read back, changed the document")
	}
	if EncodeRetirements(a) != EncodeRetirements(b) {
		t.Error("the same previous set, read back, changed the retirement record")
	}
	if got := kids(a); !slices.Equal(got, []string{k3.KeyID(), k2.KeyID(), k1.KeyID()}) {
		t.Errorf("order %v, want the current key, then the previous order for equal retirement times", got)
	}
}

func TestRestoreRejectsCorruptDocuments(t *testing.T) {
	for _, doc := range []string{`{`, `{"keys":[{"kty":"RSA"}]}`, `{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}]}`} {
		if _, err := Restore([]byte(doc), nil); err == nil {
			t.Errorf("Restore(%s) accepted", doc)
		}
	}
	if _, err := DecodeRetirements(`{"k":"yesterday"}`); err == nil {
		t.Error("bad retirement time accepted")
	}
}

// TestMaxKeysRetiresTheOldestFirst: five rotations with a cap of three keep the current
// key and the two retired most recently, and the next removal is due for a kept key.
func TestMaxKeysRetiresTheOldestFirst(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: 30 * 24 * time.Hour, MaxKeys: 3}
	var set []PublishedKey
	var order []string // kids, oldest first
	for i := range 5 {
		key := mustParse(t, newChain(t, testcerts.P256))
		order = append(order, key.KeyID())
		var due time.Time
		set, due = Plan(key, roundTrip(t, set), policy, now.Add(time.Duration(i)*time.Hour))
		if i >= 2 && !due.Equal(now.Add(time.Duration(i-1)*time.Hour).Add(policy.OldKeysTTL)) {
			t.Errorf("rotation %d: next removal %v is not the oldest kept key's", i, due)
		}
	}
	want := []string{order[4], order[3], order[2]}
	if got := kids(set); !slices.Equal(got, want) {
		t.Errorf("kept %v, want the current key and the two newest retirements %v", got, want)
	}

	policy.MaxKeys = 1
	set, due := Plan(mustParse(t, newChain(t, testcerts.P256)), roundTrip(t, set), policy, now.Add(6*time.Hour))
	if len(set) != 1 || !due.IsZero() {
		t.Errorf("a cap of one keeps only the current key: %v, due %v", kids(set), due)
	}
}

// TestMarshalWithinLeavesOutTheOldestUntilItFits: a byte budget drops retired keys,
// oldest first, and never the current key.
func TestMarshalWithinLeavesOutTheOldestUntilItFits(t *testing.T) {
	keys := []PublishedKey{
		{Key: mustParse(t, newChain(t, testcerts.RSA2048))},
		{Key: mustParse(t, newChain(t, testcerts.RSA2048)), RetiredAt: ptrTime(now)},
		{Key: mustParse(t, newChain(t, testcerts.RSA2048)), RetiredAt: ptrTime(now.Add(-time.Hour))},
	}
	two, err := Marshal(keys[:2])
	if err != nil {
		t.Fatal(err)
	}
	kept, doc, err := MarshalWithin(keys, len(two))
	if err != nil || !bytes.Equal(doc, two) || !slices.Equal(kids(kept), kids(keys[:2])) {
		t.Errorf("budget for two keys: kept %v, err %v", kids(kept), err)
	}
	kept, _, err = MarshalWithin(keys, MaxDocumentBytes)
	if err != nil || len(kept) != 3 {
		t.Errorf("a roomy budget keeps all three: %v, %v", kids(kept), err)
	}
	_, _, err = MarshalWithin(keys, 100)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Reason != jwksv1alpha1.ReasonSetTooLarge {
		t.Errorf("the current key alone over budget: %v, want %s", err, jwksv1alpha1.ReasonSetTooLarge)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// TestTheSigningKeyNeverLeaves: while a newer key waits to be promoted to the signing
// Secret, the key signers use stays in the set, second and not retired, whatever the
// TTL, the cap or the byte budget; once it stops signing its TTL starts.
func TestTheSigningKeyNeverLeaves(t *testing.T) {
	policy := Policy{KeepOldKeys: true, OldKeysTTL: time.Hour, MaxKeys: 2}
	signing, pending, newer := mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.P256)), mustParse(t, newChain(t, testcerts.P256))
	set, _ := Plan(signing, nil, policy, now)

	policy.Signing = signing.KeyID()
	set, _ = Plan(pending, roundTrip(t, set), policy, now.Add(time.Minute))
	if got := kids(set); !slices.Equal(got, []string{pending.KeyID(), signing.KeyID()}) || set[1].RetiredAt != nil {
		t.Fatalf("pending: %v, signing key retired at %v", got, set[1].RetiredAt)
	}
	// Replaced again before its promotion: the pending key is retired, and leaves first
	// under the cap; the signing key stays, long past its TTL.
	later := now.Add(48 * time.Hour)
	set, _ = Plan(newer, roundTrip(t, set), policy, later)
	if got := kids(set); !slices.Equal(got, []string{newer.KeyID(), signing.KeyID()}) || Kept(set) != 2 {
		t.Fatalf("replaced before promotion: %v", got)
	}
	if kept, _, err := MarshalWithin(set, 10); err == nil || len(kept) != 0 {
		t.Errorf("a budget for less than the signing key: kept %v, err %v", kids(kept), err)
	}
	// Promoted: the old signing key retires now, and its TTL counts from now.
	policy.Signing = ""
	promoted := later.Add(time.Minute)
	set, due := Plan(newer, roundTrip(t, set), policy, promoted)
	if got := kids(set); !slices.Equal(got, []string{newer.KeyID(), signing.KeyID()}) || !set[1].RetiredAt.Equal(promoted) || !due.Equal(promoted.Add(time.Hour)) {
		t.Errorf("after promotion: %v, retired at %v, due %v", got, set[1].RetiredAt, due)
	}
	// Without keepOldKeys the signing key still stays until the promotion.
	policy = Policy{Signing: signing.KeyID()}
	if set, _ := Plan(newer, []PublishedKey{{Key: signing}}, policy, now); len(set) != 2 {
		t.Errorf("keepOldKeys false dropped the signing key: %v", kids(set))
	}
}
