package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trustplane/trustplane/internal/testenv"
)

// TestBadConfigFiles: a configuration file with an unknown field, a wrong type, a
// duration Go cannot parse, a value a flag refuses or a value outside its range stops the
// process at start: exit 1, one line naming the field (and, for a value, an example),
// before anything connects.
func TestBadConfigFiles(t *testing.T) {
	bin := testenv.Binary(t)
	nowhere := "--kubeconfig=/nonexistent"
	const manager = "apiVersion: config.trustplane.io/v1alpha1\nkind: ManagerConfiguration\n"
	const dataplane = "apiVersion: config.trustplane.io/v1alpha1\nkind: DataplaneConfiguration\n"
	for name, tc := range map[string]struct {
		command, file, want string
	}{
		"unknown field":      {"manager", manager + "jwks:\n  wrokers: 3\n", "jwks.wrokers: unknown field"},
		"wrong section":      {"manager", manager + "manager:\n  workers: 3\n", "manager.workers: unknown field (did you mean "},
		"wrong type":         {"manager", manager + "cluster:\n  workers: eight\n", "cluster.workers: must be a number (for example cluster.workers: 4)"},
		"bad duration":       {"manager", manager + "jwks:\n  retryBaseDelay: 5 minutes\n", `jwks.retryBaseDelay: time: unknown unit " minutes" in duration "5 minutes" (for example jwks.retryBaseDelay: "30s")`},
		"unknown controller": {"manager", manager + "manager:\n  controllers: [nosuch]\n", `(field manager.controllers of --config`},
		"out of range":       {"manager", manager + "cluster:\n  workers: 0\n", "--cluster-workers must be positive, not 0 (field cluster.workers of --config"},
		"wrong kind":         {"manager", dataplane, "want apiVersion: config.trustplane.io/v1alpha1, kind: ManagerConfiguration"},
		"agent field":        {"dataplane", dataplane + "dir: /tmp/x\nquietPeriod: soon\n", `quietPeriod: time: invalid duration "soon"`},
		"agent out of range": {"dataplane", dataplane + "namespace: web\nnamespaces: [web, edge]\ndir: /tmp/x\n", "--namespace and --namespaces are mutually exclusive (field "},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := testenv.RunCommand(t, bin, tc.command, "--config="+path, nowhere)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr = %q, want %q", stderr, tc.want)
			}
		})
	}
}
