package jwkshttp

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// The JWKS server's collectors. This package never registers them: the process that runs
// the server does (the manager with the jwks controller, jwksserver.Run).
var (
	responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trustplane_jwks_server_responses_total", Help: "Responses of trustplane's own JWKS server, by status code.",
	}, []string{"code"})
	// A vector without labels: exported once a server counts, not by every process.
	connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trustplane_jwks_server_connections", Help: "Open connections of trustplane's own JWKS server (at most --jwks-server-max-connections).",
	}, nil)
)

// Collectors are the JWKS server's Prometheus collectors, for the process to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{responses, connections}
}

func countResponse(code string) { responses.WithLabelValues(code).Inc() }

// countConnection follows the server's connections (http.Server.ConnState).
func countConnection(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		connections.WithLabelValues().Inc()
	case http.StateClosed, http.StateHijacked:
		connections.WithLabelValues().Dec()
	}
}
