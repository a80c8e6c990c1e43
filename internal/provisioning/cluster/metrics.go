package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// provisionedGauge is the Cluster's own condition beside the conditions every kind reports
// (status.Metrics, trustplane_object_ready among them).
var provisionedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_cluster_provisioned",
	Help: "1 while the Cluster's ClusterProvisioned condition is True (its Shoot is up, or its brought-along kubeconfig works), 0 otherwise; by namespace and name."},
	[]string{"namespace", "name"})

// Collectors are the controller's Prometheus collectors, every one of them: whoever
// assembles the manager registers them (with status.Metrics) when the controller is
// selected; the package never registers them itself.
func Collectors() []prometheus.Collector { return []prometheus.Collector{provisionedGauge} }

// observe records c's ClusterProvisioned condition, or forgets c once it is going with no
// finalizer left.
func observe(c *operatorv1alpha1.Cluster) {
	status.ObserveObject(provisionedGauge, c, meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned))
}

// forget removes the series of the Cluster at id, its conditions' included.
func forget(c *operatorv1alpha1.Cluster, id types.NamespacedName) {
	status.ForgetObject(provisionedGauge, c, id)
}
