package secretchecksum

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the control plane's Prometheus metrics.
type Metrics struct {
	ids          *prometheus.GaugeVec
	idsOmitted   *prometheus.GaugeVec
	leftOut      *prometheus.GaugeVec
	publications *prometheus.CounterVec
	parsed       prometheus.Counter
	// versionsRemoved counts counted Secrets that lost their version annotation.
	versionsRemoved *prometheus.CounterVec
}

var defaultMetrics = func() *Metrics {
	published := []string{"track", "scope", "namespace"}
	m := &Metrics{
		ids: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_checksum_ids", Help: "IDs in a published checksum, by track (secrets, ingresses), scope (cluster, namespace) and the namespace it is published in.",
		}, published),
		idsOmitted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_checksum_ids_omitted", Help: "1 while the newest published checksum holds no IDs because they did not fit in one object.",
		}, published),
		leftOut: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_checksum_left_out", Help: "Versioned objects left out of the checksum, by track, namespace and reason.",
		}, []string{"track", "namespace", "reason"}),
		publications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_checksum_publications_total", Help: "Checksum objects published.",
		}, published),
		parsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "trustplane_checksum_certificates_parsed_total", Help: "Secrets whose certificate and key were parsed (once per change of their data, never a full re-parse).",
		}),
		versionsRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_checksum_versions_removed_total", Help: "Secrets that had the version annotation and lost it (no longer counted by Tengine-Ingress: usually a careless edit), by namespace.",
		}, []string{"namespace"}),
	}
	return m
}()

// Collectors are the controller's collectors, for the manager to register.
func Collectors() []prometheus.Collector { return defaultMetrics.collectors() }

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ids, m.idsOmitted, m.leftOut, m.publications, m.parsed, m.versionsRemoved}
}
