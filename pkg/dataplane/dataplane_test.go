package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/checksum"
)

func TestDecide(t *testing.T) {
	local := []string{"1-1-aa", "2-1-bb"}
	t0 := time.Unix(100, 0)
	other := Published{Name: "secret-old", Checksum: checksum.Sum([]string{"1-1-aa"}), IDs: []string{"1-1-aa"}, Created: t0}
	newer := Published{Name: "secret-new", Checksum: checksum.Sum([]string{"2-1-bb", "3-1-cc"}), IDs: []string{"2-1-bb", "3-1-cc"}, Created: t0.Add(time.Second)}
	match := Published{Name: "secret-match", Checksum: checksum.Sum(local), IDs: local, Created: t0}

	if v := Decide(local, []Published{other, match, newer}, false); !v.Trusted || v.Reason != Match || v.Against != "secret-match" {
		t.Errorf("any match must pass: %+v", v)
	}
	v := Decide(local, []Published{other, newer}, true)
	if v.Trusted || v.Reason != Mismatch || v.Against != "secret-new" {
		t.Fatalf("mismatch: %+v", v)
	}
	if strings.Join(v.LocalOnly, ",") != "1-1-aa" || strings.Join(v.PublishedOnly, ",") != "3-1-cc" {
		t.Errorf("diff against the newest: local-only %v, published-only %v", v.LocalOnly, v.PublishedOnly)
	}
	if v := Decide(local, nil, true); !v.Trusted || v.Reason != NoChecksumFailOpen {
		t.Errorf("fail-open: %+v", v)
	}
	if v := Decide(local, nil, false); v.Trusted || v.Reason != NoChecksumFailClosed {
		t.Errorf("fail-closed: %+v", v)
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
