package status

import (
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trustplane/trustplane/api/conditions"
)

// The conditions every kind reports, as gauges by kind, namespace and name: what an alert
// on an object that stays not Ready reads. Only names label them, never a message.
var (
	readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_object_ready",
		Help: "1 while the object's Ready condition is True, 0 otherwise; by kind (JWKSConfig, Cluster, KubeconfigRequest, SubscriptionRequest), namespace and name."},
		objectLabels)
	reconcilingGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_object_reconciling",
		Help: "1 while the object's Reconciling condition is True (work in progress, awaited or retried), 0 otherwise; by kind, namespace and name."},
		objectLabels)
	stalledGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_object_stalled",
		Help: "1 while the object's Stalled condition is True (only a change can help), 0 otherwise; by kind, namespace and name."},
		objectLabels)
)

var objectLabels = []string{"kind", "namespace", "name"}

// Metrics are the collectors of the condition gauges Finish sets. Only the manager sets
// them: each controller that reports through a Patcher registers them in its Setup
// (manager.RegisterMetrics), never when this package loads, so the agents do not export
// them.
func Metrics() []prometheus.Collector {
	return []prometheus.Collector{readyGauge, reconcilingGauge, stalledGauge}
}

// observe records obj's conditions in the gauges, or forgets obj once it is going with no
// finalizer left: the last reconcile of a deleted object.
func observe(obj conditions.Object) {
	kind, id := KindOf(obj), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if !obj.GetDeletionTimestamp().IsZero() && len(obj.GetFinalizers()) == 0 {
		forget(kind, id)
		return
	}
	conds := obj.GetConditions()
	readyGauge.WithLabelValues(kind, id.Namespace, id.Name).Set(isTrue(conds, conditions.Ready))
	reconcilingGauge.WithLabelValues(kind, id.Namespace, id.Name).Set(isTrue(conds, conditions.Reconciling))
	stalledGauge.WithLabelValues(kind, id.Namespace, id.Name).Set(isTrue(conds, conditions.Stalled))
}

// Forget removes the gauges of the object of obj's kind at id, and the version its status
// was last written at (Patch): a reconcile found it gone.
// obj only names the kind (an empty object of it will do).
func Forget(obj conditions.Object, id types.NamespacedName) { forget(KindOf(obj), id) }

func forget(kind string, id types.NamespacedName) {
	forgetWritten(kind, id)
	for _, g := range []*prometheus.GaugeVec{readyGauge, reconcilingGauge, stalledGauge} {
		g.DeleteLabelValues(kind, id.Namespace, id.Name)
	}
}

// KindOf is the kind of a typed object: its Go type's name, which is the kind of every
// trustplane type (a typed object read through a client has no TypeMeta).
func KindOf(obj any) string {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

func isTrue(conds []metav1.Condition, conditionType string) float64 {
	if meta.IsStatusConditionTrue(conds, conditionType) {
		return 1
	}
	return 0
}

// ObserveObject sets a controller's own gauge g (labels namespace, name) for obj to 1 or
// 0, or, once obj is going with no finalizer left, removes its series and obj's condition
// gauges (ForgetObject).
func ObserveObject(g *prometheus.GaugeVec, obj conditions.Object, on bool) {
	id := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if !obj.GetDeletionTimestamp().IsZero() && len(obj.GetFinalizers()) == 0 {
		ForgetObject(g, obj, id)
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	g.WithLabelValues(id.Namespace, id.Name).Set(v)
}

// ForgetObject removes the series of the object of obj's kind at id from g and from the
// condition gauges: a reconcile found it gone.
func ForgetObject(g *prometheus.GaugeVec, obj conditions.Object, id types.NamespacedName) {
	g.DeleteLabelValues(id.Namespace, id.Name)
	Forget(obj, id)
}
