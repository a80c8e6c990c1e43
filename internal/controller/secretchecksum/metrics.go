package secretchecksum

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the control plane's Prometheus metrics.
type Metrics struct {
	ids          *prometheus.GaugeVec
	leftOut      *prometheus.GaugeVec
	publications *prometheus.CounterVec
	parsed       prometheus.Counter
}

var defaultMetrics = func() *Metrics {
	m := &Metrics{
		ids: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_checksum_ids", Help: "IDs in the namespace's current checksum, by track (secrets, ingresses).",
		}, []string{"track", "namespace"}),
		leftOut: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_checksum_left_out", Help: "Objects left out of the checksum, by track and reason.",
		}, []string{"track", "namespace", "reason"}),
		publications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_checksum_publications_total", Help: "Checksum objects published.",
		}, []string{"track", "namespace"}),
		parsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "trustplane_checksum_certificates_parsed_total", Help: "Certificates parsed to compute IDs (one per changed Secret, never a full re-parse).",
		}),
	}
	metrics.Registry.MustRegister(m.ids, m.leftOut, m.publications, m.parsed)
	return m
}()
