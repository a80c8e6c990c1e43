package subscription

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// exhaustedGauge says which requests wait for a free credential: what the alert on an
// exhausted pool reads.
var exhaustedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_subscription_pool_exhausted",
	Help: "1 while the SubscriptionRequest waits because no credential of the pool fits it (Reconciling, reason PoolExhausted), 0 otherwise; by namespace and name."},
	[]string{"namespace", "name"})

// Collectors are the controller's Prometheus collectors, every one of them: whoever
// assembles the manager registers them (with status.Metrics) when the controller is
// selected; the package never registers them itself.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{exhaustedGauge, poolInventory}
}

// observe records whether sr waits on an exhausted pool, or forgets sr once it is going
// with no finalizer left.
func observe(sr *cp.SubscriptionRequest) {
	c := meta.FindStatusCondition(sr.Status.Conditions, conditions.Reconciling)
	status.ObserveObject(exhaustedGauge, sr, c != nil && c.Status == metav1.ConditionTrue && c.Reason == cp.ReasonPoolExhausted)
}

// forget removes the series of the request at id, its conditions' included.
func forget(sr *cp.SubscriptionRequest, id types.NamespacedName) {
	status.ForgetObject(exhaustedGauge, sr, id)
}
