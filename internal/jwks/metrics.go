package jwks

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
)

// The controller's collectors. The package never registers them: the manager does, for
// the controllers it runs (manager.Controller.Collectors, from Collectors).
var (
	publishedKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trustplane_jwks_published_keys", Help: "Keys in each published JWK Set.",
	}, []string{"namespace", "name"})
	certificateNotAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trustplane_jwks_current_certificate_not_after_seconds", Help: "Expiry (Unix time) of each set's current certificate.",
	}, []string{"namespace", "name"})
	apiWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trustplane_jwks_api_writes_total", Help: "Server-side applies made by the JWKS controller, by kind.",
	}, []string{"kind"})
	inputErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trustplane_jwks_input_errors_total", Help: "Reconciles stopped by bad input, by reason.",
	}, []string{"reason"})
)

// Collectors are the controller's Prometheus collectors, and those of the JWKS server
// Setup runs beside it (jwkshttp.Collectors), for the manager to register.
func Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{publishedKeys, certificateNotAfter, apiWrites, inputErrors}, jwkshttp.Collectors()...)
}
