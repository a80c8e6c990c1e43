package manager

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
)

// Options are the manager-wide settings (flags of `trustplane manager`).
type Options struct {
	// Controllers is the --controllers selection, e.g. ["*", "-jwks"].
	Controllers []string
	// MetricsBindAddress serves Prometheus metrics; "0" turns them off.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS, guarded by TokenReview/SubjectAccessReview.
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// LeaderElect makes only one replica run the controllers at a time.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty means the pod's own namespace.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// GracefulShutdownTimeout bounds how long runnables may take to stop.
	GracefulShutdownTimeout time.Duration
}

// DefaultOptions are the defaults of the manager flags. Leader election is on when
// running inside a cluster, where several replicas may run, and off on a laptop. Plain
// /metrics answers anyone who reaches it, so by default only this host can: the shipped
// manifests serve it on all interfaces with --metrics-secure instead.
func DefaultOptions() Options {
	return Options{
		Controllers:             []string{"*"},
		MetricsBindAddress:      "127.0.0.1:8080",
		HealthProbeBindAddress:  ":8081",
		LeaderElect:             inCluster(),
		LeaderElectionID:        "trustplane-manager",
		GracefulShutdownTimeout: 30 * time.Second,
	}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet, known []Controller) {
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers,
		"Controllers to run: '*' runs every controller that is on by default, 'name' adds one, '-name' removes one. Known controllers:\n"+Describe(known))
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus /metrics endpoint; '0' disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS, allowing only callers authorized to 'get' the /metrics non-resource URL.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run controllers only while holding the leader Lease (default on inside a cluster).")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader Lease (default: the pod's namespace).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader Lease.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout, "How long controllers and servers may take to stop.")
}

// Validate checks the options before anything connects: addresses that parse (or "0"),
// a Lease to elect with, and a shutdown that may take some time.
func (o *Options) Validate() error {
	if len(o.Controllers) == 0 {
		return errors.New("--controllers is empty: give '*' for every controller that is on by default")
	}
	for _, a := range []struct{ flag, addr string }{{"--metrics-bind-address", o.MetricsBindAddress}, {"--health-probe-bind-address", o.HealthProbeBindAddress}} {
		if a.addr == "0" || a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%s=%q: %w", a.flag, a.addr, err)
		}
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		return errors.New("--leader-elect needs a --leader-election-id")
	}
	if o.LeaderElect && o.LeaderElectionNamespace == "" && !inCluster() {
		return errors.New("--leader-elect outside a cluster needs --leader-election-namespace")
	}
	if o.GracefulShutdownTimeout <= 0 {
		return fmt.Errorf("--graceful-shutdown-timeout must be positive, not %v", o.GracefulShutdownTimeout)
	}
	return nil
}
