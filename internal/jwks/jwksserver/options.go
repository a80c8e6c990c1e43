package jwksserver

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/trustplane/trustplane/internal/jwks"
)

// Options are the flags of the process besides the server's own (jwks.Options).
type Options struct {
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	GracefulShutdownTimeout time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081", GracefulShutdownTimeout: 10 * time.Second}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout, "How long the server may take to stop.")
}

// DefaultServerOptions are the JWKS server's flag defaults for this process: it serves on
// :8082, as the manager does.
func DefaultServerOptions() jwks.Options { return jwks.DefaultOptions() }

// Validate checks the options before anything connects: a mistake stops the process with
// one line naming the flag. The server's own options (jwks.Options) have their own.
func (o *Options) Validate() error {
	for _, a := range []struct{ flag, value string }{
		{"--metrics-bind-address", o.MetricsBindAddress},
		{"--health-probe-bind-address", o.HealthProbeBindAddress},
	} {
		if a.value == "0" || a.value == "" {
			continue // off
		}
		_, port, err := net.SplitHostPort(a.value)
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		if err != nil || port == "" {
			return fmt.Errorf("%s %q is not host:port, such as :8080 ('0' disables it)", a.flag, a.value)
		}
	}
	if o.GracefulShutdownTimeout <= 0 {
		return fmt.Errorf("--graceful-shutdown-timeout must be a positive duration such as 10s, not %v", o.GracefulShutdownTimeout)
	}
	return nil
}
