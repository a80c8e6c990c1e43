package manager

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

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
