package kubeconfig

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: each bad flag value is refused with a one-line error naming the flag.
func TestOptionsValidate(t *testing.T) {
	if o := DefaultOptions(); o.Validate() != nil {
		t.Errorf("defaults: %v", o.Validate())
	}
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.MaxExpiration = time.Minute }, "--kubeconfig-max-expiration=1m0s: must be at least 10m0s"},
		{func(o *Options) { o.Ceiling.Allow = []string{"pods/exec"} }, `--kubeconfig-allowed-routes: route "pods/exec" is unknown`},
		{func(o *Options) { o.Workers = 0 }, "--kubeconfig-workers must be positive, not 0"},
		{func(o *Options) { o.WorkersPerNamespace = 33 }, "--kubeconfig-workers-per-namespace must be between 1 and --kubeconfig-workers (32), not 33"},
		{func(o *Options) { o.WorkersPerNamespace = 0 }, "--kubeconfig-workers-per-namespace must be between 1"},
		{func(o *Options) { o.RetryBaseDelay = 0 }, "--kubeconfig-retry-base-delay must be positive, not 0s"},
		{func(o *Options) { o.RetryMaxDelay = time.Millisecond }, "--kubeconfig-retry-max-delay must be at least --kubeconfig-retry-base-delay (500ms), not 1ms"},
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
