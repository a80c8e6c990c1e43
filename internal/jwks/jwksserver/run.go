// Package jwksserver is `trustplane jwks-server`: trustplane's JWKS server as a process of
// its own, so that a Deployment of it can be scaled, exposed and exhausted apart from the
// manager's controllers. It serves exactly what the manager's built-in server serves
// (internal/jwks.Server), from its own watch of the same objects.
package jwksserver

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/scheme"
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

// Run serves until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options, server jwks.Options) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		GracefulShutdownTimeout: &opts.GracefulShutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating the JWKS server: %w", err)
	}
	srv, err := jwks.SetupServer(mgr, server)
	if err != nil {
		return err
	}
	// Ready once the server has read every JWKSConfig and listens: a rollout sends it no
	// request it would answer with a 404 for a set it has not read yet.
	if err := manager.AddProbes(mgr, srv.Ready); err != nil {
		return err
	}
	return manager.Run(ctx, mgr)
}
