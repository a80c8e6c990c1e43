package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/status"
)

// New builds a manager with the selected controllers set up, ready to Start.
func New(cfg *rest.Config, opts Options, known []Controller) (ctrl.Manager, error) {
	selected, err := Select(known, opts.Controllers)
	if err != nil {
		return nil, err
	}
	if len(selected) == 0 {
		return nil, errors.New("--controllers selects no controller")
	}
	metricsOpts := metricsserver.Options{BindAddress: opts.MetricsBindAddress, SecureServing: opts.MetricsSecure}
	if opts.MetricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	} else if !Loopback(opts.MetricsBindAddress) {
		ctrl.Log.WithName("setup").Info("serving /metrics over plain HTTP to anyone who reaches it; add --metrics-secure or bind it to 127.0.0.1",
			"address", opts.MetricsBindAddress)
	}
	leaderNamespace := opts.LeaderElectionNamespace
	if opts.LeaderElect && leaderNamespace == "" && !inCluster() {
		return nil, errors.New("--leader-elect outside a cluster needs --leader-election-namespace")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.New(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &opts.GracefulShutdownTimeout,
		Cache:                         cache.Options{DefaultTransform: stripMetadataOnly},
		// The Patcher writes a status as an update at the version read (status.WithStatusUpdates).
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return status.WithStatusUpdates(c, cfg, o.HTTPClient)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := AddProbes(mgr, CachesSynced(mgr)); err != nil {
		return nil, err
	}
	// Every controller reports its objects' kstatus (trustplane_object_*) and its own
	// collectors; the manager registers both for the controllers it runs, so no package
	// registers a collector when it loads or sets up (test/layout checks it).
	if err := RegisterMetrics(status.Metrics()...); err != nil {
		return nil, fmt.Errorf("registering the status metrics: %w", err)
	}
	for _, c := range selected {
		if err := RegisterMetrics(c.Collectors...); err != nil {
			return nil, fmt.Errorf("registering the metrics of controller %s: %w", c.Name, err)
		}
		if err := c.Setup(mgr); err != nil {
			return nil, fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
		ctrl.Log.WithName("setup").Info("controller enabled", "controller", c.Name)
	}
	return mgr, nil
}

// AddProbes serves /healthz (the process answers) and /readyz (ready says when). Every
// trustplane process has both: its manifests probe them.
func AddProbes(mgr ctrl.Manager, ready healthz.Checker) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ready", ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return nil
}

// CachesSynced reports ready once the manager's informer caches are filled, so a rollout
// does not route traffic (the JWKS server) to a replica that would answer from an empty
// cache. The private caches of AddCache add a check each.
func CachesSynced(mgr ctrl.Manager) healthz.Checker {
	return synced(mgr.GetCache())
}

// synced is ready once c has synced, waiting at most a second per probe.
func synced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches are not synced yet")
		}
		return nil
	}
}

// Loopback says whether a bind address ("host:port", "0" for off) is reachable from this
// host only: off, or a loopback IP or localhost. An empty host (":8080") is every interface.
func Loopback(addr string) bool {
	if addr == "0" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}
