package cluster

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/trustplane/trustplane/internal/provisioning/garden"
)

// Every flag of the controller is registered beside the garden's and the kubeconfig
// policy's, parses, and a bad value
// is a one-line error naming the flag.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" valid
	}{
		{nil, ""},
		{[]string{"--cluster-workers=16", "--cluster-workers-per-namespace=2", "--cluster-target-timeout=2s"}, ""},
		{[]string{"--insecure-kubeconfig-exec", "--insecure-kubeconfig-exec-commands=/usr/local/bin/kubelogin", "--insecure-kubeconfig-tls"}, ""},
		{[]string{"--cluster-workers=0"}, "--cluster-workers must be positive"},
		{[]string{"--cluster-workers-per-namespace=9"}, "--cluster-workers-per-namespace must be between 1 and --cluster-workers"},
		{[]string{"--cluster-retry-base-delay=0s"}, "--cluster-retry-base-delay must be positive"},
		{[]string{"--cluster-retry-max-delay=10ms"}, "--cluster-retry-max-delay must be at least"},
		{[]string{"--cluster-deletion-cleanup-timeout=-1s"}, "--cluster-deletion-cleanup-timeout must not be negative"},
		{[]string{"--cluster-target-timeout=0s"}, "--cluster-target-timeout must be positive"},
		{[]string{"--insecure-kubeconfig-exec"}, "--insecure-kubeconfig-exec needs --insecure-kubeconfig-exec-commands"},
		{[]string{"--insecure-kubeconfig-exec", "--insecure-kubeconfig-exec-commands=sh"}, "not a clean absolute path"},
	} {
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		garden.DefaultOptions().AddFlags(fs)
		opts := DefaultOptions()
		opts.AddFlags(fs)
		opts.Kubeconfig.AddFlags(fs) // bound once for the manager (internal/cli), validated here too
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := opts.Validate()
		if (tc.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
