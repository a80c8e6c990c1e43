package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/trustplane/trustplane/internal/atomicfile"
)

// SnapshotFile is the name of the snapshot in the store's directory.
const SnapshotFile = "snapshot.json"

// ErrCorruptSnapshot marks a snapshot whose content does not match its checksum.
var ErrCorruptSnapshot = errors.New("snapshot is corrupt")

// Secret is one verified certificate and key.
type Secret struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Crt  []byte `json:"crt"`
	Key  []byte `json:"key"`
}

// Snapshot is a verified set of secrets.
type Snapshot struct {
	// Checksum is the consistency checksum the set was verified against.
	Checksum string `json:"checksum"`
	// Secrets are the verified secrets, sorted by name.
	Secrets []Secret `json:"secrets"`
}

// envelope is the on-disk form: the snapshot and a SHA-256 over its JSON.
type envelope struct {
	SHA256   string          `json:"sha256"`
	Snapshot json.RawMessage `json:"snapshot"`
}

// Store is a directory holding <name>.crt / <name>.key for every verified secret and the
// snapshot they came from. Every file is written to a temporary name, fsynced and renamed
// into place, so a reader (nginx) sees the old file or the new one, never half of one.
type Store struct {
	Dir string
}

// Write makes the directory hold exactly the snapshot: pairs written first, the snapshot
// file next, files of secrets no longer in the set removed last.
func (s Store) Write(snap Snapshot) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	sort.Slice(snap.Secrets, func(i, j int) bool { return snap.Secrets[i].Name < snap.Secrets[j].Name })
	keep := map[string]bool{SnapshotFile: true}
	for _, sec := range snap.Secrets {
		if !validName(sec.Name) {
			return fmt.Errorf("secret name %q cannot be a file name", sec.Name)
		}
		for suffix, content := range map[string][]byte{".crt": sec.Crt, ".key": sec.Key} {
			keep[sec.Name+suffix] = true
			if err := s.writeIfChanged(sec.Name+suffix, content, 0o600); err != nil {
				return err
			}
		}
	}
	body, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	env, err := json.Marshal(envelope{SHA256: hex.EncodeToString(sum[:]), Snapshot: body})
	if err != nil {
		return err
	}
	if err := s.writeIfChanged(SnapshotFile, env, 0o600); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !keep[name] && (strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".key")) {
			if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return atomicfile.SyncDir(s.Dir)
}

// Load reads and verifies the snapshot. A missing one is os.ErrNotExist; one whose
// content does not match its checksum is ErrCorruptSnapshot and must not be served.
func (s Store) Load() (Snapshot, error) {
	raw, err := os.ReadFile(filepath.Join(s.Dir, SnapshotFile))
	if err != nil {
		return Snapshot{}, err
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	sum := sha256.Sum256(env.Snapshot)
	if hex.EncodeToString(sum[:]) != env.SHA256 {
		return Snapshot{}, fmt.Errorf("%w: content does not match its SHA-256", ErrCorruptSnapshot)
	}
	var snap Snapshot
	if err := json.Unmarshal(env.Snapshot, &snap); err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return snap, nil
}

// Restore loads the snapshot and rewrites the certificate files from it (after a restart,
// before the API server can be reached).
func (s Store) Restore() (Snapshot, error) {
	snap, err := s.Load()
	if err != nil {
		return Snapshot{}, err
	}
	return snap, s.Write(snap)
}

func (s Store) writeIfChanged(name string, content []byte, mode os.FileMode) error {
	return atomicfile.WriteFile(filepath.Join(s.Dir, name), content, mode)
}

// validName accepts Kubernetes object names (DNS subdomains), which are safe file names.
func validName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 253 {
		return false
	}
	for _, c := range name {
		lower, digit := c >= 'a' && c <= 'z', c >= '0' && c <= '9'
		if !lower && !digit && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
