package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// now is the clock (tests set it).
var now = time.Now

// source is the tree make bench measures: the commit, marked "+dirty" when the working
// tree differs from it, and a fingerprint of every difference, so that the end can tell
// whether the code changed while the benches ran.
type source struct {
	Commit      string    `json:"commit"`
	Fingerprint string    `json:"fingerprint"`
	Started     time.Time `json:"started"`
}

// writeSource records the tree make bench starts on.
func writeSource(path string) error {
	src, err := thisSource()
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(src, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Printf("make bench on commit %s\n", src.Commit)
	return nil
}

// loadSource reads what -begin recorded and compares it with the tree now: changed says
// how they differ (empty when they do not). Without a file, the tree now is the source.
func loadSource(path string) (src source, changed string, err error) {
	current, err := thisSource()
	if err != nil {
		return source{}, "", err
	}
	if path == "" {
		return current, "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return source{}, "", fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &src); err != nil {
		return source{}, "", fmt.Errorf("%s: %w", path, err)
	}
	if src.Fingerprint != current.Fingerprint {
		changed = fmt.Sprintf("the tree was %s when make bench started and is %s now", src.Commit, current.Commit)
		if src.Commit == current.Commit {
			changed = fmt.Sprintf("the uncommitted changes to %s changed while make bench ran", src.Commit)
		}
	}
	return src, changed, nil
}

// thisSource is the commit checked out now, and the fingerprint of HEAD, the changes to
// tracked files and every untracked file that is not ignored.
func thisSource() (source, error) {
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return source{}, err
	}
	diff, err := git("diff", "HEAD", "--binary")
	if err != nil {
		return source{}, err
	}
	untracked, err := git("ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return source{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", head, diff)
	dirty := diff != ""
	for _, name := range strings.Split(untracked, "\x00") {
		if name == "" {
			continue
		}
		dirty = true
		content, err := os.ReadFile(name)
		if err != nil {
			return source{}, fmt.Errorf("fingerprint: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(content))
		h.Write(content)
	}
	commit := strings.TrimSpace(head)
	if dirty {
		commit += "+dirty"
	}
	return source{Commit: commit, Fingerprint: hex.EncodeToString(h.Sum(nil)), Started: now().UTC()}, nil
}

// git runs git in the working directory (make's: the repository's root).
func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
