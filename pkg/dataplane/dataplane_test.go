package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/checksum"
)

func TestDecide(t *testing.T) {
	const va = checksum.DefaultVersionAnnotation
	edge, all := ScopeOf([]string{"edge"}, va), ScopeOf(nil, va)
	local := []string{"1-1-aa", "2-1-bb"}
	t0 := time.Unix(100, 0)
	pub := func(name string, created int, scope string, ids ...string) Published {
		return Published{Name: name, Checksum: checksum.Sum(ids), IDs: ids, Created: t0.Add(time.Duration(created) * time.Second), Scope: scope}
	}
	omitted := pub("edge/omitted", 5, edge, "9-1-zz")
	omitted.IDs, omitted.IDsOmitted = nil, true
	for _, tc := range []struct {
		name      string
		scope     string
		published []Published
		failOpen  bool
		// want: trusted, reason, against, local-only and published-only IDs (comma-joined).
		trusted                             bool
		reason, against, localOnly, pubOnly string
		idsOmitted                          bool
	}{
		{name: "nothing published, fail-open", scope: edge, failOpen: true, trusted: true, reason: NoChecksumFailOpen},
		{name: "nothing published, fail-closed", scope: edge, reason: NoChecksumFailClosed},
		{name: "any match passes, even an older one", scope: edge, published: []Published{pub("edge/old", 0, edge, "1-1-aa"), pub("edge/match", 0, edge, local...), pub("edge/new", 1, edge, "2-1-bb", "3-1-cc")},
			trusted: true, reason: Match, against: "edge/match"},
		{name: "a match in another scope passes too, as in Tengine", scope: edge, published: []Published{pub("ops/cluster", 0, all, local...)},
			trusted: true, reason: Match, against: "ops/cluster"},
		{name: "mismatch diffs against the newest", scope: edge, failOpen: true, published: []Published{pub("edge/old", 0, edge, "1-1-aa"), pub("edge/new", 1, edge, "2-1-bb", "3-1-cc")},
			reason: Mismatch, against: "edge/new", localOnly: "1-1-aa", pubOnly: "3-1-cc"},
		{name: "equal creation times: the later name is newest", scope: edge, published: []Published{pub("edge/b", 1, edge, "1-1-aa"), pub("edge/a", 1, edge, "2-1-bb")},
			reason: Mismatch, against: "edge/b", localOnly: "2-1-bb"},
		{name: "a newer object of another scope is not diffed against", scope: edge, published: []Published{pub("edge/mine", 0, edge, "1-1-aa"), pub("ops/cluster", 9, all, "7-1-xx")},
			reason: Mismatch, against: "edge/mine", localOnly: "2-1-bb"},
		{name: "objects without a scope are candidates", scope: edge, published: []Published{pub("edge/foreign", 0, "", "1-1-aa"), pub("ops/cluster", 9, all, "7-1-xx")},
			reason: Mismatch, against: "edge/foreign", localOnly: "2-1-bb"},
		{name: "an older trustplane's scope with an empty selector is the same scope", scope: edge,
			published: []Published{pub("edge/old-format", 0, "namespaces=edge; selector=; version-annotation="+va, "1-1-aa")},
			reason:    Mismatch, against: "edge/old-format", localOnly: "2-1-bb"},
		{name: "only other scopes: ScopeMismatch against the newest, no diff", scope: edge, failOpen: true,
			published: []Published{pub("ops/cluster-old", 0, all, "1-1-aa"), pub("ops/cluster", 1, all, "1-1-aa", "7-1-xx"), pub("web/ns", 0, ScopeOf([]string{"web"}, va), "8-1-yy")},
			reason:    ScopeMismatch, against: "ops/cluster"},
		{name: "another version annotation is another scope", scope: edge, published: []Published{pub("edge/fs", 0, ScopeOf([]string{"edge"}, "fs.ingress.alibaba/version"), "1-1-aa")},
			reason: ScopeMismatch, against: "edge/fs"},
		{name: "a label-selected scope covers something else", scope: edge,
			published: []Published{pub("edge/selected", 0, "namespaces=edge; selector=app=web; version-annotation="+va, "1-1-aa")},
			reason:    ScopeMismatch, against: "edge/selected"},
		{name: "an all-namespaces data plane diffs against the cluster object", scope: all,
			published: []Published{pub("ops/cluster", 0, all, "1-1-aa"), pub("edge/ns", 5, edge, "2-1-bb", "3-1-cc")},
			reason:    Mismatch, against: "ops/cluster", localOnly: "2-1-bb"},
		{name: "no scope of its own: every object is a candidate", published: []Published{pub("edge/mine", 0, edge, "1-1-aa"), pub("ops/cluster", 9, all, "7-1-xx")},
			reason: Mismatch, against: "ops/cluster", localOnly: "1-1-aa,2-1-bb", pubOnly: "7-1-xx"},
		{name: "IDs omitted: a mismatch without a diff", scope: edge, published: []Published{pub("edge/old", 0, edge, "1-1-aa"), omitted},
			reason: Mismatch, against: "edge/omitted", idsOmitted: true},
		{name: "IDs omitted but the checksum matches", scope: edge, published: []Published{{Name: "edge/big", Checksum: checksum.Sum(local), IDsOmitted: true, Scope: edge}},
			trusted: true, reason: Match, against: "edge/big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.scope, local, tc.published, tc.failOpen)
			if v.Checksum != checksum.Sum(local) {
				t.Errorf("local checksum %s", v.Checksum)
			}
			got := fmt.Sprintf("%v %s %s [%s] [%s] %v", v.Trusted, v.Reason, v.Against, strings.Join(v.LocalOnly, ","), strings.Join(v.PublishedOnly, ","), v.IDsOmitted)
			want := fmt.Sprintf("%v %s %s [%s] [%s] %v", tc.trusted, tc.reason, tc.against, tc.localOnly, tc.pubOnly, tc.idsOmitted)
			if got != want {
				t.Errorf("verdict\n got %s\nwant %s", got, want)
			}
		})
	}
}

// The scope a ScopeMismatch names is the one the newest object covers.
func TestDecideNamesTheForeignScope(t *testing.T) {
	all := ScopeOf(nil, checksum.DefaultVersionAnnotation)
	v := Decide(ScopeOf([]string{"a"}, checksum.DefaultVersionAnnotation), []string{"1-1-aa"},
		[]Published{{Name: "a/cluster", Checksum: "x", Scope: all}}, false)
	if v.Reason != ScopeMismatch || v.AgainstScope != all || v.Trusted {
		t.Errorf("%+v", v)
	}
}

func TestStoreWritesAtomicallyAndDetectsCorruption(t *testing.T) {
	dir := t.TempDir()
	s := Store{Dir: dir}
	first := Snapshot{Checksum: "c1", Secrets: []Secret{{Name: "a-1", ID: "1-1-x", Crt: []byte("CRT-A"), Key: []byte("KEY-A")}, {Name: "b-2", ID: "2-1-y", Crt: []byte("CRT-B"), Key: []byte("KEY-B")}}}
	if err := s.Write(first); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a-1.crt")); string(got) != "CRT-A" {
		t.Errorf("a-1.crt = %q", got)
	}
	if info, _ := os.Stat(filepath.Join(dir, "b-2.key")); info.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v", info.Mode().Perm())
	}
	// The next set drops b-2: its files go; no temporary file is left behind.
	second := Snapshot{Checksum: "c2", Secrets: []Secret{{Name: "a-1", ID: "1-2-z", Crt: []byte("CRT-A2"), Key: []byte("KEY-A2")}}}
	if err := s.Write(second); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "a-1.crt,a-1.key,snapshot.json" {
		t.Errorf("directory holds %v", names)
	}
	loaded, err := s.Load()
	if err != nil || loaded.Checksum != "c2" || string(loaded.Secrets[0].Crt) != "CRT-A2" {
		t.Fatalf("Load = %+v, %v", loaded, err)
	}

	// Restore rewrites deleted files from the snapshot.
	os.Remove(filepath.Join(dir, "a-1.crt"))
	if _, err := s.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a-1.crt")); string(got) != "CRT-A2" {
		t.Errorf("restored a-1.crt = %q", got)
	}

	// One flipped byte anywhere in the content is detected.
	raw, _ := os.ReadFile(filepath.Join(dir, SnapshotFile))
	i := strings.Index(string(raw), "c2")
	raw[i+1] = '3'
	os.WriteFile(filepath.Join(dir, SnapshotFile), raw, 0o600)
	if _, err := s.Load(); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("corrupt snapshot: %v", err)
	}
	os.WriteFile(filepath.Join(dir, SnapshotFile), []byte("{truncated"), 0o600)
	if _, err := s.Restore(); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("truncated snapshot: %v", err)
	}
	if err := (Store{Dir: t.TempDir()}).Write(Snapshot{Secrets: []Secret{{Name: "../etc/passwd"}}}); err == nil {
		t.Error("a name escaping the directory was written")
	}
}

func dirNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// CA bundles are files of the set like pairs: written, compared, cleaned up; a set that
// spans namespaces names its files <namespace>.<name>.
func TestStoreCAFilesAndNamespacedNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snaps []Snapshot
		files string // after the last snapshot
	}{
		{"a CA-only secret writes only its CA and CRL",
			[]Snapshot{{Secrets: []Secret{{Name: "ca-3", ID: "3-1-", CA: []byte("CA"), CRL: []byte("CRL")}}}},
			"ca-3.ca.crl,ca-3.ca.crt,snapshot.json"},
		{"a pair with a CA writes all three",
			[]Snapshot{{Secrets: []Secret{{Name: "site-1", ID: "1-1-x", Crt: []byte("C"), Key: []byte("K"), CA: []byte("CA")}}}},
			"site-1.ca.crt,site-1.crt,site-1.key,snapshot.json"},
		{"a CA that leaves its secret is removed, the pair stays",
			[]Snapshot{
				{Secrets: []Secret{{Name: "site-1", ID: "1-1-x", Crt: []byte("C"), Key: []byte("K"), CA: []byte("CA"), CRL: []byte("CRL")}}},
				{Secrets: []Secret{{Name: "site-1", ID: "1-2-x", Crt: []byte("C"), Key: []byte("K")}}},
			},
			"site-1.crt,site-1.key,snapshot.json"},
		{"namespaced names; a switch from one namespace to several removes the old names",
			[]Snapshot{
				{Secrets: []Secret{{Name: "site-1", ID: "1-1-x", Crt: []byte("C"), Key: []byte("K")}, {Name: "ca-3", ID: "3-1-", CA: []byte("CA")}}},
				{Secrets: []Secret{{Namespace: "edge", Name: "site-1", ID: "1-1-x", Crt: []byte("C"), Key: []byte("K")}, {Namespace: "web", Name: "ca-3", ID: "3-1-", CA: []byte("CA")}}},
			},
			"edge.site-1.crt,edge.site-1.key,snapshot.json,web.ca-3.ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := Store{Dir: dir}
			for _, snap := range tc.snaps {
				if err := s.Write(snap); err != nil {
					t.Fatal(err)
				}
			}
			if got := dirNames(t, dir); got != tc.files {
				t.Errorf("directory holds %s, want %s", got, tc.files)
			}
			last := tc.snaps[len(tc.snaps)-1]
			for _, sec := range last.Secrets {
				for name, want := range sec.files() {
					if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != string(want) {
						t.Errorf("%s = %q, %v; want %q", name, got, err, want)
					}
				}
			}
			// Restore brings back every file, the CA ones too.
			for _, name := range strings.Split(tc.files, ",") {
				if name != SnapshotFile {
					os.Remove(filepath.Join(dir, name))
				}
			}
			if _, err := s.Restore(); err != nil {
				t.Fatal(err)
			}
			if got := dirNames(t, dir); got != tc.files {
				t.Errorf("after Restore the directory holds %s, want %s", got, tc.files)
			}
		})
	}
}

func TestStoreRefusesAmbiguousFiles(t *testing.T) {
	for name, secrets := range map[string][]Secret{
		"a CA and a pair that share a file":  {{Name: "x", CA: []byte("CA")}, {Name: "x.ca", Crt: []byte("C")}},
		"a namespace with a dot":             {{Namespace: "a.b", Name: "c", Crt: []byte("C")}},
		"a namespace escaping the directory": {{Namespace: "..", Name: "c", Crt: []byte("C")}},
	} {
		if err := (Store{Dir: t.TempDir()}).Write(Snapshot{Secrets: secrets}); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

// A snapshot written before namespaces and CA files existed still loads and restores.
func TestStoreLoadsOldSnapshots(t *testing.T) {
	dir := t.TempDir()
	body := `{"checksum":"c1","secrets":[{"name":"site-1","id":"1-1-x","crt":"Q1JU","key":"S0VZ"}]}`
	sum := sha256.Sum256([]byte(body))
	env := `{"sha256":"` + hex.EncodeToString(sum[:]) + `","snapshot":` + body + `}`
	if err := os.WriteFile(filepath.Join(dir, SnapshotFile), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := Store{Dir: dir}.Restore()
	if err != nil || snap.Checksum != "c1" || len(snap.Secrets) != 1 {
		t.Fatalf("Restore = %+v, %v", snap, err)
	}
	if got := dirNames(t, dir); got != "site-1.crt,site-1.key,snapshot.json" {
		t.Errorf("directory holds %s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "site-1.key")); string(got) != "KEY" {
		t.Errorf("site-1.key = %q", got)
	}
}

// Clear leaves no verified set behind: no secret file and no snapshot; other files stay.
func TestStoreClear(t *testing.T) {
	dir := t.TempDir()
	s := Store{Dir: dir}
	if err := s.Write(Snapshot{Secrets: []Secret{{Name: "site-1", Crt: []byte("C"), Key: []byte("K"), CA: []byte("CA")}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); got != "nginx.conf" {
		t.Errorf("directory holds %s", got)
	}
	if _, err := s.Load(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load after Clear: %v", err)
	}
	if err := (Store{Dir: filepath.Join(dir, "missing")}).Clear(); err != nil {
		t.Errorf("clearing a missing directory: %v", err)
	}
}
