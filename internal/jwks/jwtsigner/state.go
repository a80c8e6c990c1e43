package jwtsigner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trustplane/trustplane/internal/atomicfile"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

const (
	// StateFile is the file in --state-dir that holds what the signer last served.
	StateFile = "state.json"
	// SeedCertificate and SeedKey are the seed of a new control plane in --state-dir:
	// the tls.crt and tls.key that the certificate Secret will hold.
	SeedCertificate = "tls.crt"
	SeedKey         = "tls.key"
	// startupRefreshHint is the refresh hint while the signer serves from its state dir:
	// kube-apiserver asks again soon, and gets the cluster's set once the signer reads it.
	startupRefreshHint = 10 * time.Second
)

// state is state.json: the last snapshot the signer served from the cluster.
type state struct {
	JWKSConfig    string          `json:"jwksConfig"`
	DataTimestamp time.Time       `json:"dataTimestamp"`
	RefreshHint   string          `json:"refreshHint"`
	Set           json.RawMessage `json:"jwks"`
	SigningKey    string          `json:"signingKey"`
}

// SaveState writes snap to dir/state.json (mode 0600, atomically) as the state of
// jwksConfig (namespace/name).
func SaveState(dir, jwksConfig string, snap *Snapshot) error {
	raw, err := json.MarshalIndent(state{
		JWKSConfig: jwksConfig, DataTimestamp: snap.DataTimestamp.UTC(), RefreshHint: snap.RefreshHint.String(),
		Set: json.RawMessage(snap.Set), SigningKey: string(snap.SigningKeyPEM),
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, StateFile), append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("--state-dir: writing %s: %w", StateFile, err)
	}
	return nil
}

// LoadState reads what the signer serves at start from dir: state.json when there is
// one (it must be jwksConfig's), else the seed tls.crt and tls.key, whose key makes a set
// of one. It returns nil, nil when dir holds neither.
func LoadState(dir, jwksConfig string, now time.Time) (*Snapshot, error) {
	raw, err := os.ReadFile(filepath.Join(dir, StateFile))
	switch {
	case err == nil:
		return fromState(dir, raw, jwksConfig)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	crt, crtErr := os.ReadFile(filepath.Join(dir, SeedCertificate))
	key, keyErr := os.ReadFile(filepath.Join(dir, SeedKey))
	switch {
	case errors.Is(crtErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return nil, nil
	case crtErr != nil:
		return nil, fmt.Errorf("--state-dir: the seed needs %s beside %s: %w", SeedCertificate, SeedKey, crtErr)
	case keyErr != nil:
		return nil, fmt.Errorf("--state-dir: the seed needs %s beside %s: %w", SeedKey, SeedCertificate, keyErr)
	}
	published, err := jwkset.ParseChain(crt, "", now)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: seed %s: %w", filepath.Join(dir, SeedCertificate), err)
	}
	set, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: published}})
	if err != nil {
		return nil, fmt.Errorf("--state-dir: seed %s: %w", filepath.Join(dir, SeedCertificate), err)
	}
	info, err := os.Stat(filepath.Join(dir, SeedCertificate))
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	return checked(Build(Input{From: "seed " + dir, Set: set, SigningKey: key, DataTimestamp: info.ModTime(), RefreshHint: startupRefreshHint}))
}

func fromState(dir string, raw []byte, jwksConfig string) (*Snapshot, error) {
	path := filepath.Join(dir, StateFile)
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("--state-dir: %s does not parse: %w", path, err)
	}
	if st.JWKSConfig != jwksConfig {
		return nil, fmt.Errorf("--state-dir: %s is the state of JWKSConfig %s, not of --jwksconfig %s: give each signer its own directory", path, st.JWKSConfig, jwksConfig)
	}
	return checked(Build(Input{From: StateFile, Set: st.Set, SigningKey: []byte(st.SigningKey), DataTimestamp: st.DataTimestamp, RefreshHint: startupRefreshHint}))
}

// checked refuses a snapshot from the state dir that cannot serve: the signer wrote only
// snapshots that did, so another one is a seed's mistake or a damaged file.
func checked(s *Snapshot) (*Snapshot, error) {
	if !s.Serves() {
		err := s.KeysErr
		if err == nil {
			err = s.SignErr
		}
		return nil, fmt.Errorf("--state-dir (%s): %w", s.From, err)
	}
	return s, nil
}

// keyIDs are the kids of a snapshot's set, for logs.
func keyIDs(s *Snapshot) []string {
	kids := make([]string, 0, len(s.Keys))
	for _, k := range s.Keys {
		kids = append(kids, k.KeyId)
	}
	return kids
}
