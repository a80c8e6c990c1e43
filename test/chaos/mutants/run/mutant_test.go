package main

import (
	"strings"
	"testing"
	"time"
)

const diff = `diff --git a/x.go b/x.go
--- a/x.go
+++ b/x.go
@@ -1 +1 @@
-a
+b
`

func TestParseMutant(t *testing.T) {
	m, err := parseMutant(`Invariant: jwks: retired key kept for its TTL
Systems: jwks, checksum
Duration: 2m
Seed: 42
Faults: 7
Why: the TTL is read from the wrong field.

` + diff)
	if err != nil {
		t.Fatal(err)
	}
	if m.invariant != "jwks: retired key kept for its TTL" || strings.Join(m.systems, ",") != "jwks,checksum" ||
		m.duration != 2*time.Minute || m.seed != 42 || m.faults != 7 || m.why != "the TTL is read from the wrong field." {
		t.Errorf("parsed %+v", m)
	}
	if m, err := parseMutant("Invariant: a: b\nSystems: jwks\nDuration: 1m\nWhy: w\n" + diff); err != nil || m.seed != 0 || m.faults != 0 {
		t.Errorf("without Seed and Faults: %+v, %v", m, err)
	}
}

func TestParseMutantRefuses(t *testing.T) {
	for name, patch := range map[string]string{
		"no invariant":     "Systems: jwks\nDuration: 1m\nWhy: w\n" + diff,
		"no why":           "Invariant: a: b\nSystems: jwks\nDuration: 1m\n" + diff,
		"unknown system":   "Invariant: a: b\nSystems: jwsk\nDuration: 1m\nWhy: w\n" + diff,
		"too long":         "Invariant: a: b\nSystems: jwks\nDuration: 20m\nWhy: w\n" + diff,
		"bad seed":         "Invariant: a: b\nSystems: jwks\nDuration: 1m\nSeed: -1\nWhy: w\n" + diff,
		"unknown key":      "Invariant: a: b\nSystems: jwks\nDuration: 1m\nWhy: w\nSeeds: 1\n" + diff,
		"key twice":        "Invariant: a: b\nInvariant: c: d\nSystems: jwks\nDuration: 1m\nWhy: w\n" + diff,
		"not key: value":   "Invariant: a: b\nSystems: jwks\nDuration: 1m\nWhy: w\nsome prose\n" + diff,
		"no diff":          "Invariant: a: b\nSystems: jwks\nDuration: 1m\nWhy: w\n",
		"empty invariant":  "Invariant:\nSystems: jwks\nDuration: 1m\nWhy: w\n" + diff,
		"negative faults":  "Invariant: a: b\nSystems: jwks\nDuration: 1m\nFaults: -2\nWhy: w\n" + diff,
		"zero duration":    "Invariant: a: b\nSystems: jwks\nDuration: 0s\nWhy: w\n" + diff,
		"unparsed seconds": "Invariant: a: b\nSystems: jwks\nDuration: 90\nWhy: w\n" + diff,
	} {
		if _, err := parseMutant(patch); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestViolation(t *testing.T) {
	const inv = "jwks: signing key served"
	for _, c := range []struct {
		line, at string
		ok       bool
	}{
		{"chaos   41.2s VIOLATION jwks: signing key served: JWKSConfig steady-1 at revision 812: ...", "41.2s", true},
		{"chaos  301.0s VIOLATION jwks: signing key served: x", "301.0s", true},
		// The repetition at the end of the run, through t.Error.
		{"    chaos_test.go:98: VIOLATION jwks: signing key served: x", "", true},
		// Another invariant, one whose name starts with this one's, and mere mentions.
		{"chaos   41.2s VIOLATION jwks: served set lags the ConfigMap by at most cacheMaxAge: x", "", false},
		{"chaos   41.2s VIOLATION jwks: signing key served twice: x", "", false},
		{"chaos   41.2s not judged (1) jwks: signing key served: compacted", "", false},
		{"chaos: seed 1, faults 3, invariant checks 900, violations 0, not judged 2", "", false},
	} {
		at, ok := violation(c.line, inv)
		if at != c.at || ok != c.ok {
			t.Errorf("violation(%q) = %q, %v; want %q, %v", c.line, at, ok, c.at, c.ok)
		}
	}
}

func TestScan(t *testing.T) {
	out := "chaos    1.0s seed 7\nchaos   12.5s VIOLATION pool: claim kept: a\nchaos   20.0s VIOLATION pool: claim kept: b\n" +
		"chaos: seed 7, faults 3, invariant checks 900, violations 2, not judged 0\n--- FAIL: TestChaos (90.00s)\n"
	if res := scan(strings.NewReader(out), "pool: claim kept"); !res.caught || res.at != "12.5s" || !res.finished {
		t.Errorf("scan = %+v; want the first violation, finished", res)
	}
	if res := scan(strings.NewReader(out), "pool: one tenant per credential"); res.caught || !res.finished {
		t.Errorf("scan = %+v; want not caught by another invariant, finished", res)
	}
	broken := "starting test control plane: kube-apiserver did not start\nFAIL\tgithub.com/trustplane/trustplane/test/chaos\t118.5s\n"
	if res := scan(strings.NewReader(broken), "pool: claim kept"); res.caught || res.finished || !strings.HasPrefix(res.first, "starting test control plane") {
		t.Errorf("scan = %+v; want a run that did not finish, and its first line", res)
	}
}

// TestMutantsParse: every patch kept in test/chaos/mutants has a header the runner reads.
func TestMutantsParse(t *testing.T) {
	mutants, err := loadMutants("..", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		if m.invariant == "" || len(m.systems) == 0 {
			t.Errorf("%s: %+v", m.name, m)
		}
	}
}
