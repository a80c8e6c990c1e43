package checksum

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
)

func TestNameID(t *testing.T) {
	for name, want := range map[string]string{
		"alibaba-taobao-com-27555": "27555",
		"alibaba-com-ecc-118":      "118",
		"x-007":                    "7",
		"x-0":                      "0",
		"a-b-c-42":                 "42",
		"only-":                    "",
		"noseparator":              "",
		"x-7a":                     "",
		"x-1.5":                    "",
		"x-99999999999999999999":   "",
	} {
		got, err := NameID(name)
		if want == "" {
			if l, ok := IsLeftOut(err); !ok || l.Reason != tenginev1alpha1.ReasonNoNumericID {
				t.Errorf("NameID(%q) = %q, %v; want left out", name, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("NameID(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{DefaultVersionAnnotation: "5792"}, "5792"},
		{map[string]string{DefaultVersionAnnotation: "007"}, "7"},
		{map[string]string{DefaultVersionAnnotation: "0"}, ""},
		{map[string]string{DefaultVersionAnnotation: ""}, ""},
		{map[string]string{DefaultVersionAnnotation: "v1"}, ""},
	} {
		got, err := Version(tc.annotations, DefaultVersionAnnotation)
		if tc.want == "" {
			if l, ok := IsLeftOut(err); !ok || l.Reason != tenginev1alpha1.ReasonNoVersion {
				t.Errorf("Version(%v) = %q, %v; want left out", tc.annotations, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Version(%v) = %q, %v; want %q", tc.annotations, got, err, tc.want)
		}
	}
	if got, err := Version(map[string]string{"fs.ingress.alibaba/version": "5793"}, "fs.ingress.alibaba/version"); err != nil || got != "5793" {
		t.Errorf("configurable key: %q %v", got, err)
	}
}

// TestSumOfTheSeedExample: the 26 IDs of the seed's SecretCheckSum give its checksum.
func TestSumOfTheSeedExample(t *testing.T) {
	ids := strings.Fields(`118-5792-8c0483a291c2252a455c95084d98ccc2d0e14ae7 119-5793-1cf61c5ababc59763fbe93707bcc8ed4ba33c53b
150-4527-9ff9ec8e87e2a07542f2bcd962d019976e872892 151-4528-1fc9c2611ea665d5c4d75dbd36925d8b216b8081
234-4886-a2ea71a0123762ae44a49da3508bbc67a9f02863 235-4887-8a0246a2f6aa51bbc9d32a1353e3e63d0037a9da
260-5981-871c6a02d2232093e689795f5a0df7e953bcb570 261-5980-1ab5a6f64c8091060ab48382b303c7bffaeb4b26
264-6463-dff7c772437916727c43e3767b8cf0d4452dd719 265-6464-c5eea9758e7b3724ffed53e9384576c67a24dc1d
266-6292-a41493642e0e8d615afa70d24bc9dfe54fe17217 267-6293-c8dbd1cabfd474b6fd5bbbee6f39bc68aa456fe8
285-6272-e221079b1d85019a1b70ab14de00baa8404956ac 286-6273-11254b5b51a3874ecfd85e061a4da10f483fd6a4
287-6214-8233074567ed69da4015578343a4e84b04cf9be6 288-6215-44a72405d239fbffde3e0f49f1c0713636dcda60
305-4535-ad183f5fc3362f39c39e770591e18e44f34d92e3 306-4536-871848aac0e233351ab9e75ff26624575e76df84
332-4964-e139a84129d95fa995d4121e51c4ca0d578909b2 333-4965-66990d215429631cd7febaaf64cbe9e98bddfed7
68-6197-724bf09c63274a551e4203b1c135a9df8e9f46f4 69-6198-75f488f260e9320003b2748ae9069cae0e3d6e0f
72-6082-5e9d2740f1054e553c285e7c2e53a4dc701ec571 73-6083-214b26a9585203ec073866003b3933f39b56e716
76-6443-c60175b3410ca4afd94636238029aaa351b0c24c 77-6442-3e3c599315315e2ac55cc28539fa6e126f0355be`)
	reversed := append([]string(nil), ids...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	if got := Sum(reversed); got != "50d00d896e16a82a5fe3e9b741abf04e" {
		t.Errorf("Sum = %s, want the seed's 50d00d896e16a82a5fe3e9b741abf04e", got)
	}
}

func TestSumEdgeCases(t *testing.T) {
	if got := Sum(nil); got != "d41d8cd98f00b204e9800998ecf8427e" {
		t.Errorf("empty set: %s, want MD5 of the empty string", got)
	}
	// String order, not numeric: "68-..." sorts after "333-...".
	if Sum([]string{"68-1-a", "333-1-b"}) != Sum([]string{"333-1-b", "68-1-a"}) {
		t.Error("order of input changed the sum")
	}
	// The wire format cannot tell ["a","b"] from ["a,b"]: harmless, IDs never contain ','.
	// Tengine computes it this way, so a "fix" here would break compatibility.
	if Sum([]string{"a", "b"}) != Sum([]string{"a,b"}) {
		t.Error("the join is not Tengine's plain ',' join")
	}
}

// TestPemSHAMatchesOpenSSL: PemSHA is what `openssl x509 -fingerprint -sha1` prints, of
// the leaf, also when tls.crt holds the whole chain.
func TestPemSHAMatchesOpenSSL(t *testing.T) {
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "example.com", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(path, chain.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("openssl", "x509", "-in", path, "-noout", "-fingerprint", "-sha1").Output()
	if err != nil {
		t.Fatalf("openssl: %v (make test installs it)", err)
	}
	// "SHA1 Fingerprint=AB:CD:..." → "abcd..."
	want := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(strings.SplitN(string(out), "=", 2)[1]), ":", ""))
	got, err := PemSHA(chain.PEM())
	if err != nil || got != want {
		t.Errorf("PemSHA = %s, %v; openssl says %s", got, err, want)
	}
	leafOnly, _ := PemSHA(testcerts.CertPEM(chain.Leaf))
	if leafOnly != got {
		t.Error("chain and leaf-only tls.crt differ")
	}
	caFirst, _ := PemSHA(append(testcerts.CertPEM(chain.CA), testcerts.CertPEM(chain.Leaf)...))
	if caFirst == got {
		t.Error("PemSHA must hash the first certificate")
	}
	for _, bad := range [][]byte{nil, []byte("garbage"), chain.KeyPEM(), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")} {
		if _, err := PemSHA(bad); err == nil {
			t.Errorf("PemSHA(%.20q) accepted", bad)
		}
	}
	id, err := SecretID("example-com-42", map[string]string{DefaultVersionAnnotation: "3"}, DefaultVersionAnnotation,
		map[string][]byte{KeyTLSCrt: chain.PEM(), KeyTLSKey: chain.KeyPEM()})
	if err != nil || id != "42-3-"+want {
		t.Errorf("SecretID = %s, %v", id, err)
	}
	if id, err := IngressID("web-0012", map[string]string{DefaultVersionAnnotation: "9"}, DefaultVersionAnnotation); err != nil || id != "12-9" {
		t.Errorf("IngressID = %s, %v", id, err)
	}
}

// TestNotVersionedIsItsOwnReason: an object without the annotation is not meant for the
// checksum (and is never reported); one with a bad value is.
func TestNotVersionedIsItsOwnReason(t *testing.T) {
	for _, annotations := range []map[string]string{nil, {"fs.ingress.alibaba/version": "1"}} {
		if _, err := Version(annotations, DefaultVersionAnnotation); !isReason(err, tenginev1alpha1.ReasonNotVersioned) {
			t.Errorf("Version(%v): %v, want %s", annotations, err, tenginev1alpha1.ReasonNotVersioned)
		}
	}
	// The version is checked before the name: an unversioned cert-manager "web-tls" Secret
	// is NotVersioned, not NoNumericID.
	if _, err := SecretID("web-tls", nil, DefaultVersionAnnotation, nil); !isReason(err, tenginev1alpha1.ReasonNotVersioned) {
		t.Errorf("SecretID of an unversioned, unnumbered Secret: %v", err)
	}
}

func isReason(err error, reason string) bool {
	l, ok := IsLeftOut(err)
	return ok && l.Reason == reason
}

func TestSetMatchesFullRecompute(t *testing.T) {
	s := NewSet()
	ref := map[string]string{}
	check := func() {
		t.Helper()
		var ids []string
		for _, id := range ref {
			ids = append(ids, id)
		}
		if got, want := s.Checksum(), Sum(ids); got != want {
			t.Fatalf("incremental %s != full %s", got, want)
		}
	}
	check()
	for i := range 300 {
		key := string(rune('a' + i%37))
		id := []string{"1-1-aa", "2-1-bb", "10-2-cc", "2-1-bb"}[i%4] + key
		if i%5 == 4 {
			s.Remove(key)
			delete(ref, key)
		} else {
			s.Put(key, id)
			ref[key] = id
		}
		check()
	}
	if !s.Put("dup1", "same") || !s.Put("dup2", "same") || s.Put("dup2", "same") {
		t.Error("Put change reporting")
	}
	ids, _ := s.Snapshot()
	n := 0
	for _, id := range ids {
		if id == "same" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("duplicate IDs from two objects: %d kept, want 2", n)
	}
}

func TestDiff(t *testing.T) {
	l, p := Diff([]string{"a", "b", "c", "c"}, []string{"b", "c", "d"})
	if strings.Join(l, ",") != "a,c" || strings.Join(p, ",") != "d" {
		t.Errorf("Diff = %v / %v", l, p)
	}
}

// TestSetCheckpointsMatchFullRecompute: thousands of IDs (many MD5 checkpoints) and
// random changes anywhere in the order, each checked against a full recompute.
func TestSetCheckpointsMatchFullRecompute(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	s := NewSet()
	ref := map[string]string{}
	for i := range 5000 {
		key := fmt.Sprintf("k%d", i)
		id := fmt.Sprintf("%d-%d-%x", r.Intn(100000), 1+r.Intn(9), r.Int63())
		s.Put(key, id)
		ref[key] = id
	}
	full := func() string {
		ids := make([]string, 0, len(ref))
		for _, id := range ref {
			ids = append(ids, id)
		}
		return Sum(ids)
	}
	if s.Checksum() != full() {
		t.Fatal("initial checksum differs")
	}
	for step := range 300 {
		key := fmt.Sprintf("k%d", r.Intn(6000))
		switch r.Intn(3) {
		case 0:
			s.Remove(key)
			delete(ref, key)
		default:
			id := fmt.Sprintf("%d-%d-%x", r.Intn(100000), 1+r.Intn(9), r.Int63())
			s.Put(key, id)
			ref[key] = id
		}
		if step%3 == 0 { // also let several changes pile up between checksums
			if got, want := s.Checksum(), full(); got != want {
				t.Fatalf("step %d: incremental %s != full %s", step, got, want)
			}
		}
	}
}

// A tenant's 256 KiB version annotation is quoted in events and logs: abbreviated.
func TestVersionMessageIsBounded(t *testing.T) {
	_, err := Version(map[string]string{DefaultVersionAnnotation: strings.Repeat("x", 256<<10)}, DefaultVersionAnnotation)
	l, ok := IsLeftOut(err)
	if !ok || l.Reason != tenginev1alpha1.ReasonNoVersion || len(l.Message) > 200 {
		t.Errorf("left out: %v (%d bytes)", ok, len(err.Error()))
	}
}

// TestSetMergesBatchesOfChanges: changes pile up between checksums in batches of every
// size (merged one by one or in one pass), with IDs put and taken out again, keys moved
// to another ID and back, and IDs two keys share; each checked against a full recompute.
func TestSetMergesBatchesOfChanges(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	s := NewSet()
	ref := map[string]string{}
	ids := make([]string, 50) // a small pool: shared IDs and re-puts are common
	for i := range ids {
		ids[i] = fmt.Sprintf("site-%d-%d-%x", r.Intn(1000), 1+r.Intn(3), r.Int63())
	}
	full := func() string {
		all := make([]string, 0, len(ref))
		for _, id := range ref {
			all = append(all, id)
		}
		return Sum(all)
	}
	for batch := range 200 {
		for range 1 + r.Intn(3*mergeOneByOne) {
			key := fmt.Sprintf("k%d", r.Intn(80))
			if r.Intn(4) == 0 {
				s.Remove(key)
				delete(ref, key)
				continue
			}
			id := ids[r.Intn(len(ids))]
			s.Put(key, id)
			ref[key] = id
		}
		if got, want := s.Checksum(), full(); got != want {
			t.Fatalf("batch %d: incremental %s != full %s", batch, got, want)
		}
		if got, _ := s.Snapshot(); len(got) != len(ref) || s.Len() != len(ref) {
			t.Fatalf("batch %d: %d IDs (Len %d), want %d", batch, len(got), s.Len(), len(ref))
		}
	}
}
