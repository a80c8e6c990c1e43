package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trustplane/trustplane/internal/configfile"
)

// notInFiles are the flags that are not configuration: where the file is and where the
// cluster is.
func notInFiles(name string) bool {
	return name == "config" || name == "kubeconfig" || name == "help"
}

// TestEveryFlagHasAField: each flag of manager, node-agent, dataplane and jwks-server (but
// --config and --kubeconfig; the --zap-* logging flags included) is a field of that
// subcommand's configuration file.
func TestEveryFlagHasAField(t *testing.T) {
	manager, m := newManagerCommand()
	nodeAgent, n := newNodeAgentCommand()
	dataplane, d := newDataplaneCommand()
	jwksServer, j := newJWKSServerCommand()
	for _, tc := range []struct {
		cmd    *cobra.Command
		schema *configfile.Schema
	}{{manager, m}, {nodeAgent, n}, {dataplane, d}, {jwksServer, j}} {
		fields := map[string]bool{}
		for _, f := range tc.schema.Fields() {
			if f.Flag == nil {
				continue // a section read from the file only
			}
			if fields[f.Flag.Name] {
				t.Errorf("%s: --%s is two fields", tc.schema.Kind, f.Flag.Name)
			}
			fields[f.Flag.Name] = true
		}
		tc.cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !fields[f.Name] && !notInFiles(f.Name) && !f.Hidden {
				t.Errorf("%s: --%s has no field", tc.schema.Kind, f.Name)
			}
		})
		if len(fields) < 8 {
			t.Errorf("%s has only %d fields", tc.schema.Kind, len(fields))
		}
	}
}

// TestReferenceIsCurrent: docs/configuration.md and the chart's values.schema.json are
// what hack/configref makes of the flags now (run `make manifests` after changing a flag).
func TestReferenceIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, ConfigReference()) {
		t.Error("docs/configuration.md is stale: run make manifests")
	}
	values, err := os.ReadFile(filepath.Join(root, "charts", "trustplane", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ValuesSchema(values)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "charts", "trustplane", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("charts/trustplane/values.schema.json is stale: run make manifests")
	}
}

// TestSectionPrefixes: a section's fields drop the prefix its flags share.
func TestSectionPrefixes(t *testing.T) {
	_, m := newManagerCommand()
	want := map[string]string{"--jwks-retry-base-delay": "jwks.retryBaseDelay", "--podcertificate-signer-ca-secret": "podcertificateSigner.caSecret",
		"--tls-expiry-secret-max-certificate-bytes": "tlsExpiry.secretMaxCertificateBytes", "--garden-kubeconfig": "garden.kubeconfig",
		"--shoot-nodes-cidr": "shoot.nodesCidr", "--controllers": "manager.controllers", "--cluster-target-timeout": "tenantKubeconfig.clusterTargetTimeout"}
	for _, f := range m.Fields() {
		if f.Flag == nil {
			continue
		}
		if path, ok := want["--"+f.Flag.Name]; ok && path != f.Path {
			t.Errorf("--%s is %s, want %s", f.Flag.Name, f.Path, path)
		}
		delete(want, "--"+f.Flag.Name)
	}
	if len(want) > 0 {
		t.Errorf("no fields for %v", want)
	}
}
