package jwks

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	keys        *prometheus.GaugeVec
	expiry      *prometheus.GaugeVec
	writes      *prometheus.CounterVec
	inputErrors *prometheus.CounterVec
	served      *prometheus.CounterVec
	connections *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_jwks_published_keys", Help: "Keys in each published JWK Set.",
		}, []string{"namespace", "name"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_jwks_current_certificate_not_after_seconds", Help: "Expiry (Unix time) of each set's current certificate.",
		}, []string{"namespace", "name"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_jwks_api_writes_total", Help: "Server-side applies made by the JWKS controller, by kind.",
		}, []string{"kind"}),
		inputErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_jwks_input_errors_total", Help: "Reconciles stopped by bad input, by reason.",
		}, []string{"reason"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trustplane_jwks_server_responses_total", Help: "Responses of trustplane's own JWKS server, by status code.",
		}, []string{"code"}),
		// A vector without labels: exported once a server counts, not by every process.
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trustplane_jwks_server_connections", Help: "Open connections of trustplane's own JWKS server (at most --jwks-server-max-connections).",
		}, nil),
	}
	reg.MustRegister(m.keys, m.expiry, m.writes, m.inputErrors, m.served, m.connections)
	return m
}

var defaultMetrics = NewMetrics(metrics.Registry)

func (m *Metrics) observeSet(cfg *jwksv1alpha1.JWKSConfig, keys []jwkset.PublishedKey) {
	if m == nil {
		return
	}
	m.keys.WithLabelValues(cfg.Namespace, cfg.Name).Set(float64(len(keys)))
	m.expiry.WithLabelValues(cfg.Namespace, cfg.Name).Set(float64(keys[0].NotAfter.Unix()))
}

func (m *Metrics) countWrite(kind string) {
	if m != nil {
		m.writes.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) countInputError(reason string) {
	if m != nil {
		m.inputErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) countResponse(code string) {
	if m != nil {
		m.served.WithLabelValues(code).Inc()
	}
}

// countConnection follows the server's connections (http.Server.ConnState).
func (m *Metrics) countConnection(_ net.Conn, state http.ConnState) {
	if m == nil {
		return
	}
	switch state {
	case http.StateNew:
		m.connections.WithLabelValues().Inc()
	case http.StateClosed, http.StateHijacked:
		m.connections.WithLabelValues().Dec()
	}
}

func (m *Metrics) forget(id types.NamespacedName) {
	if m == nil {
		return
	}
	m.keys.DeleteLabelValues(id.Namespace, id.Name)
	m.expiry.DeleteLabelValues(id.Namespace, id.Name)
}
