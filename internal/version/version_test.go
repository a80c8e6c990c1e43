package version_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trustplane/trustplane/internal/testenv"
)

// TestEveryBuildNamesItsCommit: `trustplane version` names the checkout's commit however a
// user builds it from the checkout: `make build`, the build of `make run` (its program is
// the trustplane CLI too, under that name) and a plain `go build`.
func TestEveryBuildNamesItsCommit(t *testing.T) {
	root := testenv.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, out string) (binary string)
	}{
		{"make build", func(t *testing.T, out string) string {
			run(t, root, nil, "make", "--no-print-directory", "build", "BIN="+out)
			return filepath.Join(out, "trustplane")
		}},
		{"make run's program", func(t *testing.T, out string) string {
			run(t, root, nil, "make", "--no-print-directory", "run-program", "BIN="+out)
			return filepath.Join(out, "trustplane-run")
		}},
		{"go build", func(t *testing.T, out string) string {
			// Go stamps the commit itself (vcs.revision) with its default -buildvcs=auto. A
			// machine may turn that off for every build (`go env -w GOFLAGS=-buildvcs=false`,
			// as this project's CI machines do); only make's builds name the commit there.
			binary := filepath.Join(out, "trustplane")
			run(t, root, []string{"GOFLAGS=-buildvcs=auto"}, "go", "build", "-o", binary, "./cmd/trustplane")
			return binary
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := head(t, root)
			binary := tc.build(t, t.TempDir())
			got := versionOf(t, binary)
			commits := []string{before, head(t, root)} // someone may commit meanwhile
			if !slices.ContainsFunc(commits, func(c string) bool { return strings.Contains(got, "(commit "+c+",") }) {
				t.Errorf("trustplane version = %q, want the commit %s", got, before)
			}
		})
	}
}

func head(t *testing.T, root string) string {
	t.Helper()
	return strings.TrimSpace(run(t, root, nil, "git", "rev-parse", "HEAD"))
}

// versionOf is what `trustplane version` prints when binary is called as trustplane: make
// run's program is the trustplane CLI under that name.
func versionOf(t *testing.T, binary string) string {
	t.Helper()
	cmd := exec.Command(binary, "version")
	cmd.Args[0] = "trustplane"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binary, err, out)
	}
	return string(out)
}

// run runs a command in dir with the test's environment plus env, and returns its output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
