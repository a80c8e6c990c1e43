package samples

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The hints are read from where a newcomer reads them, never copied into this test: what
// make run prints once it is ready, and the "look at" column of README's samples table.

// guide is what make run printed once ready, as the blocks of commands it shows in order.
type guide struct {
	setup   []string // PATH, KUBECONFIG, and applying the samples
	lookAt  []string // what each system made of its sample
	cleanUp []string // taking the samples away again
}

const guideStart = "trustplane is ready. In another terminal:"

// parseGuide finds the guide in make run's output: its commands are the lines indented by
// two spaces, in blocks separated by prose; lines starting with "#" are comments.
func parseGuide(t *testing.T, output string) guide {
	t.Helper()
	start := strings.Index(output, guideStart)
	if start < 0 {
		t.Fatalf("make run printed no %q; output:\n%s", guideStart, output)
	}
	var blocks [][]string
	inBlock := false
	for _, line := range strings.Split(output[start:], "\n")[1:] {
		command, indented := strings.CutPrefix(line, "  ")
		switch {
		case indented && strings.HasPrefix(command, "#"):
		case indented:
			if !inBlock {
				blocks = append(blocks, nil)
			}
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], strings.TrimSpace(command))
			inBlock = true
		case strings.HasPrefix(line, "Press Ctrl-C"):
			return guideOf(t, blocks, output[start:])
		case strings.TrimSpace(line) != "":
			inBlock = false
		}
	}
	t.Fatalf("the guide does not end with Press Ctrl-C:\n%s", output[start:])
	return guide{}
}

func guideOf(t *testing.T, blocks [][]string, text string) guide {
	t.Helper()
	if len(blocks) != 3 {
		t.Fatalf("the guide has %d blocks of commands, want 3 (set up, look at, clean up):\n%s", len(blocks), text)
	}
	return guide{setup: blocks[0], lookAt: blocks[1], cleanUp: blocks[2]}
}

// readmeHints are the commands of the "look at" column of README's samples table, for
// this make run: the README speaks of make run's default addresses and its .local/.
func readmeHints(t *testing.T, addrs localcp.Addresses, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "### The samples\n")
	if !found {
		t.Fatal(`README.md has no "### The samples" section`)
	}
	defaults := localcp.DefaultAddresses()
	forThisRun := strings.NewReplacer(
		defaults.JWKS, addrs.JWKS, defaults.Metrics, addrs.Metrics, defaults.Probes, addrs.Probes,
		defaults.NodeAgentMetrics, addrs.NodeAgentMetrics, ".local/", dir+"/")
	code := regexp.MustCompile("`([^`]+)`")
	var hints []string
	for i, row := range tableRows(section) {
		cells := strings.Split(row, "|")
		if len(cells) != 5 {
			t.Fatalf("README's samples table: row %q has %d columns, want 3 (a | inside a command?)", row, len(cells)-2)
		}
		if i < 2 { // the header and the line under it
			continue
		}
		commands := code.FindAllStringSubmatch(cells[3], -1)
		if len(commands) == 0 {
			t.Errorf("README's samples table: %q has nothing to look at", strings.TrimSpace(cells[1]))
		}
		for _, c := range commands {
			hints = append(hints, forThisRun.Replace(c[1]))
		}
	}
	if len(hints) == 0 {
		t.Fatal("README's samples table has no commands")
	}
	return hints
}

// tableRows are the lines of the first Markdown table in text.
func tableRows(text string) []string {
	var rows []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
		} else if len(rows) > 0 {
			break
		}
	}
	return rows
}

// shell runs hints as a newcomer's shell does: in the checkout, with what earlier
// `export` hints set.
type shell struct {
	env []string
}

// newShell starts from the test's environment, without $KUBECONFIG: the guide says what
// to export.
func newShell() *shell {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return &shell{env: env}
}

var exportLine = regexp.MustCompile(`^export ([A-Za-z_][A-Za-z0-9_]*)=`)

// failOnHTTPErrors makes curl exit non-zero on an HTTP error status (still printing the
// body), as a newcomer reading a 404 would count it as failed.
const failOnHTTPErrors = `curl() { command curl --fail-with-body "$@"; }` + "\n"

// hintTimeout bounds every hint; `kubectl delete` waits for namespaces to be emptied.
const hintTimeout = 3 * time.Minute

// run runs each command with bash: it must exit 0 within hintTimeout, say nothing on
// stderr (kubectl's "No resources found" goes there) and show something: non-empty
// output that is not an empty list. It returns what they showed.
func (s *shell) run(t *testing.T, commands ...string) (shown string) {
	t.Helper()
	var all strings.Builder
	for _, command := range commands {
		if m := exportLine.FindStringSubmatch(command); m != nil {
			s.export(t, command, m[1])
			continue
		}
		stdout, stderr, err := s.bash(failOnHTTPErrors + command)
		switch {
		case err != nil || stderr != "":
			t.Errorf("%s: %v\nstdout:\n%s\nstderr:\n%s", command, err, stdout, stderr)
		case showsNothing(stdout):
			t.Errorf("%s shows nothing:\n%s", command, stdout)
		default:
			t.Logf("%s:\n%s", command, stdout)
		}
		all.WriteString(stdout + "\n")
	}
	return all.String()
}

// export evaluates an `export NAME=...` line as bash does and keeps the value for the
// commands that follow.
func (s *shell) export(t *testing.T, line, name string) {
	t.Helper()
	value, stderr, err := s.bash(line + "\nprintf %s \"$" + name + "\"")
	if err != nil || stderr != "" {
		t.Fatalf("%s: %v\n%s", line, err, stderr)
	}
	s.env = append(s.env, name+"="+value) // the last one wins
}

// getenv is a variable as the shell has it now.
func (s *shell) getenv(name string) string {
	value := ""
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			value = v
		}
	}
	return value
}

func (s *shell) bash(script string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), hintTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", script)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = s.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// On timeout, end what bash started too (kubectl), not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %v: %w", hintTimeout, err)
	}
	return out.String(), errOut.String(), err
}

// showsNothing: no output, or kubectl's empty list (-o yaml or -o json in a namespace
// with none of the kind).
func showsNothing(stdout string) bool {
	if strings.TrimSpace(stdout) == "" {
		return true
	}
	for _, line := range strings.Split(stdout, "\n") {
		if line := strings.TrimSpace(line); line == "items: []" || line == `"items": [],` || line == `"items": []` {
			return true
		}
	}
	return false
}

// checkShown: the hints, together, name every sample of trustplane's own kinds: a hint in
// the wrong namespace shows none of them, or hides some (another namespace's).
func checkShown(t *testing.T, s *sampleSet, shown string) {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		for _, sample := range s.ofKind(crd.Spec.Names.Kind) {
			// A name stands alone, or after the resource in kubectl's "kind.group/name".
			name := regexp.MustCompile(`(?m)(^|[\s/])` + regexp.QuoteMeta(sample.GetName()) + `(\s|$)`)
			if !name.MatchString(shown) {
				t.Errorf("no hint shows the sample %s %s", sample.GetKind(), path.Join(sample.GetNamespace(), sample.GetName()))
			}
		}
	}
}
