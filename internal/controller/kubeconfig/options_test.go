package kubeconfig

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: each bad flag value is refused with a one-line error naming the flag.
func TestOptionsValidate(t *testing.T) {
	if err := (&Options{MaxExpiration: 30 * 24 * time.Hour}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.MaxExpiration = time.Minute }, "--kubeconfig-max-expiration=1m0s: must be at least 10m0s"},
		{func(o *Options) { o.Ceiling.Allow = []string{"pods/exec"} }, `--kubeconfig-allowed-routes: route "pods/exec" is unknown`},
	} {
		o := DefaultOptions()
		tc.change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Validate() = %v, want one line with %q", err, tc.want)
		}
	}
	// The namespace of the ServiceAccounts is protected whatever the flag says.
	o := DefaultOptions()
	o.Ceiling.ProtectedNamespaces = nil
	if c := o.ceiling(); len(c.ProtectedNamespaces) != 1 || c.ProtectedNamespaces[0] != TargetNamespace {
		t.Errorf("protected namespaces %v", c.ProtectedNamespaces)
	}
}
