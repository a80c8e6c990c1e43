package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxDuration bounds a mutant's chaos run: the check is meant to be short, and the
// machine it runs on is shared.
const maxDuration = 5 * time.Minute

// systemNames are the chaos suite's systems (test/chaos, CHAOS_SYSTEMS).
var systemNames = []string{"podcert", "aggregation", "jwks", "checksum", "kubeconfig", "cluster"}

// A mutant is one deliberate bug: a patch, and what its header says about the run that
// must catch it.
type mutant struct {
	// name is the patch's file name without .patch.
	name, path string
	// invariant is the invariant a run on the patched tree must report violated.
	invariant string
	// systems are CHAOS_SYSTEMS for the run.
	systems []string
	// duration is CHAOS_DURATION.
	duration time.Duration
	// seed is CHAOS_SEED (0: a new one each time); faults is CHAOS_FAULTS (0: as many as fit).
	seed   uint64
	faults int
	// why says what the bug is.
	why string
}

// loadMutants reads every *.patch in dir, in name order; only, when not empty, keeps
// those named.
func loadMutants(dir string, only []string) ([]mutant, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	var out []mutant
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".patch")
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := parseMutant(string(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m.name, m.path = name, path
		out = append(out, m)
	}
	for _, name := range only {
		if !slices.ContainsFunc(out, func(m mutant) bool { return m.name == name }) {
			return nil, fmt.Errorf("no mutant %s in %s", name, dir)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mutants (*.patch) in %s", dir)
	}
	return out, nil
}

// parseMutant reads a patch's header: "Key: value" lines before the diff (git apply
// ignores them). Invariant, Systems, Duration and Why are required; Seed and Faults are
// optional.
func parseMutant(patch string) (mutant, error) {
	var m mutant
	seen := map[string]bool{}
	diff := false
	for line := range strings.Lines(patch) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "diff ") || strings.HasPrefix(line, "--- ") {
			diff = true
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return m, fmt.Errorf("header line %q is not \"Key: value\"", line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if seen[key] {
			return m, fmt.Errorf("header key %s given twice", key)
		}
		seen[key] = true
		if err := m.set(key, value); err != nil {
			return m, err
		}
	}
	for _, key := range []string{"Invariant", "Systems", "Duration", "Why"} {
		if !seen[key] {
			return m, fmt.Errorf("the header has no %s line", key)
		}
	}
	if !diff {
		return m, errors.New("no diff after the header")
	}
	return m, nil
}

// set sets one header field.
func (m *mutant) set(key, value string) error {
	var err error
	switch key {
	case "Invariant":
		m.invariant = value
	case "Systems":
		m.systems = strings.Split(value, ",")
		for i, s := range m.systems {
			m.systems[i] = strings.TrimSpace(s)
			if !slices.Contains(systemNames, m.systems[i]) {
				err = fmt.Errorf("%q is not one of %s", m.systems[i], strings.Join(systemNames, ", "))
			}
		}
	case "Duration":
		m.duration, err = time.ParseDuration(value)
		if err == nil && (m.duration <= 0 || m.duration > maxDuration) {
			err = fmt.Errorf("want a duration in (0, %v]", maxDuration)
		}
	case "Seed":
		m.seed, err = strconv.ParseUint(value, 10, 64)
	case "Faults":
		m.faults, err = strconv.Atoi(value)
		if err == nil && m.faults < 0 {
			err = errors.New("want a non-negative number")
		}
	case "Why":
		m.why = value
	default:
		return fmt.Errorf("unknown header key %s (want Invariant, Systems, Duration, Seed, Faults, Why)", key)
	}
	if err != nil {
		return fmt.Errorf("%s: %q: %w", key, value, err)
	}
	if value == "" {
		return fmt.Errorf("%s is empty", key)
	}
	return nil
}

// runTime is the time stamp a chaos run puts on its lines: "chaos   41.2s ...".
var runTime = regexp.MustCompile(`^chaos +([0-9.]+s) `)

// violation says whether line reports a violation of exactly invariant (the harness
// prints "VIOLATION <invariant>: <detail>", as it happens and again at the end), and when
// in the run it was found ("41.2s"; "" when the line carries no time).
func violation(line, invariant string) (at string, ok bool) {
	if !strings.Contains(line, "VIOLATION "+invariant+": ") {
		return "", false
	}
	if m := runTime.FindStringSubmatch(line); m != nil {
		return m[1], true
	}
	return "", true
}
