package manager

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func names(cs []Controller) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func TestSelect(t *testing.T) {
	known := []Controller{{Name: "a"}, {Name: "b"}, {Name: "c", DisabledByDefault: true}}
	for _, tc := range []struct {
		spec    []string
		want    string
		wantErr string
	}{
		{spec: []string{"*"}, want: "a,b"},
		{spec: []string{"*", "-a"}, want: "b"},
		{spec: []string{"-a", "*"}, want: "b"},
		{spec: []string{"*", "c"}, want: "a,b,c"},
		{spec: []string{"b"}, want: "b"},
		{spec: []string{"c"}, want: "c"},
		{spec: []string{" a ", ""}, want: "a"},
		{spec: []string{"*", "-a", "a"}, want: "a,b"},
		{spec: nil, want: ""},
		{spec: []string{"nosuch"}, wantErr: `unknown controller "nosuch" in --controllers (known: a, b, c)`},
		{spec: []string{"*", "-nosuch"}, wantErr: `unknown controller "nosuch"`},
	} {
		got, err := Select(known, tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Select(%q) error = %v, want %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Select(%q) unexpected error: %v", tc.spec, err)
			continue
		}
		if names(got) != tc.want {
			t.Errorf("Select(%q) = %q, want %q", tc.spec, names(got), tc.want)
		}
	}
}

func TestDescribeListsEveryController(t *testing.T) {
	out := Describe([]Controller{{Name: "jwks", Help: "JWK Sets"}, {Name: "x", Help: "X", DisabledByDefault: true}})
	for _, want := range []string{"jwks", "JWK Sets", "x", "(off by default)"} {
		if !strings.Contains(out, want) {
			t.Errorf("Describe output %q lacks %q", out, want)
		}
	}
}

// TestDeprecatedAliasSetsTheSameValue: a flag's old name sets the renamed flag's value,
// says which name replaced it, and is left out of the usage text.
func TestDeprecatedAliasSetsTheSameValue(t *testing.T) {
	var workers int
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	fs.IntVar(&workers, "signer-workers", 16, "Concurrent signings.")
	DeprecatedAlias(fs, "podcert-signer-workers", "signer-workers")
	if err := fs.Parse([]string{"--podcert-signer-workers=3"}); err != nil {
		t.Fatal(err)
	}
	if workers != 3 {
		t.Errorf("--podcert-signer-workers=3 set %d", workers)
	}
	if !strings.Contains(out.String(), "--podcert-signer-workers has been deprecated, use --signer-workers") {
		t.Errorf("no deprecation warning: %q", out.String())
	}
	if strings.Contains(fs.FlagUsages(), "podcert-signer-workers") {
		t.Errorf("the alias is listed in the usage:\n%s", fs.FlagUsages())
	}
}

// TestOptionsValidate: the manager's flags are checked before anything connects.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(o *Options)
		want   string // "" when valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"metrics off", func(o *Options) { o.MetricsBindAddress = "0" }, ""},
		{"no controllers", func(o *Options) { o.Controllers = nil }, "--controllers is empty"},
		{"metrics address without a port", func(o *Options) { o.MetricsBindAddress = "127.0.0.1" }, "--metrics-bind-address"},
		{"probe address without a port", func(o *Options) { o.HealthProbeBindAddress = "localhost" }, "--health-probe-bind-address"},
		{"leader election without a Lease name", func(o *Options) { o.LeaderElect, o.LeaderElectionID, o.LeaderElectionNamespace = true, "", "x" }, "--leader-election-id"},
		{"no shutdown time", func(o *Options) { o.GracefulShutdownTimeout = 0 }, "--graceful-shutdown-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.LeaderElect = false
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
