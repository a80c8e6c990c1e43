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

// Secret is one verified Secret: a certificate and its key, a CA bundle, or both.
type Secret struct {
	// Namespace is set when a set spans namespaces: the files are then named
	// <namespace>.<name>.* (namespaces hold no dots, so the name stays unambiguous).
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	ID        string `json:"id"`
	// Crt and Key are tls.crt and tls.key, written as <base>.crt and <base>.key; a CA-only
	// Secret has neither.
	Crt []byte `json:"crt,omitempty"`
	Key []byte `json:"key,omitempty"`
	// CA and CRL are ca.crt and ca.crl, written as <base>.ca.crt and <base>.ca.crl.
	CA  []byte `json:"ca,omitempty"`
	CRL []byte `json:"crl,omitempty"`
}

// Base is the name the secret's files start with: <name>, or <namespace>.<name>.
func (s Secret) Base() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "." + s.Name
}

// files are the secret's file names and contents; absent parts write no file.
func (s Secret) files() map[string][]byte {
	out := map[string][]byte{}
	for suffix, content := range map[string][]byte{".crt": s.Crt, ".key": s.Key, ".ca.crt": s.CA, ".ca.crl": s.CRL} {
		if len(content) > 0 {
			out[s.Base()+suffix] = content
		}
	}
	return out
}

// Snapshot is a verified set of secrets.
type Snapshot struct {
	// Checksum is the consistency checksum the set was verified against.
	Checksum string `json:"checksum"`
	// Secrets are the verified secrets, sorted by Base.
	Secrets []Secret `json:"secrets"`
}

// envelope is the on-disk form: the snapshot and a SHA-256 over its JSON.
type envelope struct {
	SHA256   string          `json:"sha256"`
	Snapshot json.RawMessage `json:"snapshot"`
}

// Store is a directory holding the files of every verified secret (<base>.crt, .key,
// .ca.crt, .ca.crl; see Secret.Base) and the snapshot they came from. Every file is written
// to a temporary name, fsynced and renamed into place, so a reader (nginx) sees the old
// file or the new one, never half of one.
type Store struct {
	Dir string
}

// Write makes the directory hold exactly the snapshot: the secrets' files written first,
// the snapshot file next, files of secrets no longer in the set removed last.
func (s Store) Write(snap Snapshot) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	sort.Slice(snap.Secrets, func(i, j int) bool { return snap.Secrets[i].Base() < snap.Secrets[j].Base() })
	keep, err := s.writeSecrets(snap.Secrets)
	if err != nil {
		return err
	}
	if err := s.writeSnapshot(snap); err != nil {
		return err
	}
	if err := s.removeAllBut(keep); err != nil {
		return err
	}
	return atomicfile.SyncDir(s.Dir)
}

// writeSecrets writes every secret's files and returns their names. Two secrets that
// would write the same file are an error, not a silent overwrite.
func (s Store) writeSecrets(secrets []Secret) (map[string]bool, error) {
	keep := map[string]bool{}
	for _, sec := range secrets {
		if !validName(sec.Name) || (sec.Namespace != "" && !validNamespace(sec.Namespace)) {
			return nil, fmt.Errorf("secret %s/%s cannot be a file name", sec.Namespace, sec.Name)
		}
		for name, content := range sec.files() {
			if keep[name] {
				return nil, fmt.Errorf("two secrets write %s", name)
			}
			keep[name] = true
			if err := s.writeIfChanged(name, content, 0o600); err != nil {
				return nil, err
			}
		}
	}
	return keep, nil
}

func (s Store) writeSnapshot(snap Snapshot) error {
	body, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	env, err := json.Marshal(envelope{SHA256: hex.EncodeToString(sum[:]), Snapshot: body})
	if err != nil {
		return err
	}
	return s.writeIfChanged(SnapshotFile, env, 0o600)
}

// removeAllBut removes the certificate, key, CA and CRL files not named in keep.
func (s Store) removeAllBut(keep map[string]bool) error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if keep[name] || !isSecretFile(name) {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// Clear removes every secret file and the snapshot: the directory then holds no
// verified set (a rollback when there was none before).
func (s Store) Clear() error {
	if err := os.Remove(filepath.Join(s.Dir, SnapshotFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := s.removeAllBut(nil); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	return atomicfile.SyncDir(s.Dir)
}

// isSecretFile says a directory entry is one Write manages (.ca.crt and .ca.crl end in
// .crt and .crl); temporary files start with "." and end otherwise.
func isSecretFile(name string) bool {
	return strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".key") || strings.HasSuffix(name, ".crl")
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

// validNamespace accepts namespace names (DNS labels): no dots, so <namespace>.<name>
// splits one way only.
func validNamespace(ns string) bool {
	return validName(ns) && !strings.Contains(ns, ".") && len(ns) <= 63
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
