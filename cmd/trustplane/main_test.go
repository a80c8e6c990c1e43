package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the tests run this binary's main as a real process: with
// TRUSTPLANE_RUN_MAIN set, the test binary is trustplane.
func TestMain(m *testing.M) {
	if os.Getenv("TRUSTPLANE_RUN_MAIN") == "1" {
		os.Args = append([]string{"trustplane"}, strings.Fields(os.Getenv("TRUSTPLANE_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, args string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRUSTPLANE_RUN_MAIN=1", "TRUSTPLANE_ARGS="+args, "KUBECONFIG=/nonexistent")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running trustplane %s: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func TestBadInvocationsExitNonZeroWithOneLine(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"manager --controllers=nosuch", `trustplane: unknown controller "nosuch" in --controllers`},
		{"manager --controllers=*,-nosuch", `unknown controller "nosuch"`},
		{"manager --no-such-flag", "trustplane: unknown flag: --no-such-flag"},
		{"nosuchcommand", `trustplane: unknown command "nosuchcommand"`},
		{"version extra", `trustplane: unknown command "extra"`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, stderr, code := runMain(t, tc.args)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero")
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", lines, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, _, code := runMain(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "trustplane ") {
		t.Fatalf("version: code %d, stdout %q", code, stdout)
	}
}

func TestHelpListsControllers(t *testing.T) {
	stdout, _, code := runMain(t, "manager --help")
	if code != 0 {
		t.Fatalf("manager --help exited %d", code)
	}
	for _, want := range []string{"--controllers", "--leader-elect", "--metrics-bind-address", "--health-probe-bind-address", "--zap-log-level", "--kubeconfig",
		"jwks ", "--jwks-server-bind-address", "--jwks-min-update-interval",
		"clusterrole-aggregation ", "--clusterrole-aggregation-workers", "role-aggregation ", "--role-aggregation-workers"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("manager --help lacks %s", want)
		}
	}
}
