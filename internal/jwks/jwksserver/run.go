// Package jwksserver is `trustplane jwks-server`: trustplane's JWKS server as a process of
// its own, so that a Deployment of it can be scaled, exposed and exhausted apart from the
// manager's controllers. It serves exactly what the manager's built-in server serves
// (internal/jwks/jwkshttp.Server), from its own watch of the same objects.
package jwksserver

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Run serves until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options, server jwks.Options) error {
	// Every flag is checked before the manager is built.
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := server.Validate(); err != nil {
		return err
	}
	// The process's own collectors: the server's (the manager registers a controller's).
	if err := manager.RegisterMetrics(jwkshttp.Collectors()...); err != nil {
		return err
	}
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
