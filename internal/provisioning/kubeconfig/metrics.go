package kubeconfig

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// When each published kubeconfig is due for rotation and when it expires: what the alerts
// on a rotation that does not happen read. A request without a published kubeconfig (not
// issued yet, denied, revoked) has neither. They are registered in Setup: only the manager
// sets them.
var (
	rotationDueGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_kubeconfig_rotation_due_timestamp_seconds",
		Help: "When the published kubeconfig of a KubeconfigRequest is due for rotation (Unix time: --kubeconfig-rotate-fraction into its lifetime); by namespace and name."},
		[]string{"namespace", "name"})
	expirationGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_kubeconfig_expiration_timestamp_seconds",
		Help: "When the published kubeconfig of a KubeconfigRequest expires (Unix time, status.expirationTimestamp); by namespace and name."},
		[]string{"namespace", "name"})
)

// orphansDeleted counts the target objects swept because their request was gone.
var orphansDeleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "trustplane_kubeconfig_orphans_deleted_total",
	Help: "Objects in target clusters (ServiceAccounts, token bindings, roles, bindings) deleted because the KubeconfigRequest they were granted to no longer exists."})

// Collectors are the controller's Prometheus collectors, every one of them: whoever
// assembles the manager registers them (with status.Metrics) when the controller is
// selected; the package never registers them itself.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{rotationDueGauge, expirationGauge, orphansDeleted}
}

// observe records when kr's published kubeconfig is due for rotation and expires, or
// forgets them when it has none, and kr with them once it is going with no finalizer left.
func (r *Reconciler) observe(kr *operatorv1alpha1.KubeconfigRequest) {
	id := types.NamespacedName{Namespace: kr.Namespace, Name: kr.Name}
	switch {
	case !kr.DeletionTimestamp.IsZero() && len(kr.Finalizers) == 0:
		forget(kr, id)
	case kr.Status.Kubeconfig == "" || kr.Status.ExpirationTimestamp == nil || kr.Status.IssuedAt == nil:
		rotationDueGauge.DeleteLabelValues(id.Namespace, id.Name)
		expirationGauge.DeleteLabelValues(id.Namespace, id.Name)
	default:
		rotationDueGauge.WithLabelValues(id.Namespace, id.Name).Set(float64(r.rotateAt(kr).Unix()))
		expirationGauge.WithLabelValues(id.Namespace, id.Name).Set(float64(kr.Status.ExpirationTimestamp.Unix()))
	}
}

// forget removes the series of the request at id, its conditions' included.
func forget(kr *operatorv1alpha1.KubeconfigRequest, id types.NamespacedName) {
	rotationDueGauge.DeleteLabelValues(id.Namespace, id.Name)
	expirationGauge.DeleteLabelValues(id.Namespace, id.Name)
	status.Forget(kr, id)
}
