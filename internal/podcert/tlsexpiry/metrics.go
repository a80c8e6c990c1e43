package tlsexpiry

import "github.com/prometheus/client_golang/prometheus"

// What the alerts on expiring Secrets read. The manager registers them (Collectors) when it
// runs the controller.
var (
	notAfterGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_tls_secret_not_after_seconds",
		Help: "Expiry (Unix time) of each kubernetes.io/tls Secret's leaf certificate."}, []string{"namespace", "name"})
	stateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_tls_secret_states",
		Help: "kubernetes.io/tls Secrets by state (fresh, overdue_for_refresh, expired, invalid, too_large)."}, []string{"state"})
)

// Collectors are the controller's collectors, for the manager to register.
func Collectors() []prometheus.Collector { return []prometheus.Collector{notAfterGauge, stateGauge} }
