package manager

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trustplane/trustplane/internal/version"
)

// buildInfo is 1 in every trustplane process (Run registers it): it tells a trustplane
// target from the other controller-runtime processes a Prometheus scrapes, whose
// controller_runtime_* metrics look the same (the alert on rising reconcile errors joins
// on it).
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_build_info",
	Help: "1 in every trustplane process (manager, node agent, data-plane agent), with the version it was built as."}, []string{"version"})

// registerBuildInfo registers and sets trustplane_build_info.
func registerBuildInfo() error {
	if err := RegisterMetrics(buildInfo); err != nil {
		return err
	}
	buildInfo.WithLabelValues(version.Version).Set(1)
	return nil
}

// RegisterMetrics adds collectors to the registry that /metrics serves. Every subcommand is
// the same binary, so a collector registered when its package loads is exported by every
// process, and one that only the data-plane agent sets shows, always 0, on the manager and
// the node agent too: each process registers what it sets when it starts. Registering a
// collector again (a second agent or manager in one test process) is not an error.
func RegisterMetrics(collectors ...prometheus.Collector) error {
	for _, c := range collectors {
		err := metrics.Registry.Register(c)
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) && already.ExistingCollector == c {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ReplaceMetrics registers c in place of a collector already registered with the same
// descriptors: a collector that reads one agent's state at scrape time reports the newest
// agent of the process (tests run several).
func ReplaceMetrics(c prometheus.Collector) error {
	err := metrics.Registry.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		metrics.Registry.Unregister(already.ExistingCollector)
		err = metrics.Registry.Register(c)
	}
	return err
}
