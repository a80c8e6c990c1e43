package subscription

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// requestOfShoot maps a Shoot to the SubscriptionRequest of its Cluster (named as the Cluster).
func requestOfShoot(_ context.Context, s *unstructured.Unstructured) []reconcile.Request {
	l := s.GetLabels()
	if l[operatorv1alpha1.ClusterNamespaceLabel] == "" || l[operatorv1alpha1.ClusterNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[operatorv1alpha1.ClusterNamespaceLabel], Name: l[operatorv1alpha1.ClusterNameLabel]}}}
}

// shootDeleted passes deletions of Shoots only: a release waits for the request's own
// Shoot to go.
var shootDeleted = predicate.TypedFuncs[*unstructured.Unstructured]{
	CreateFunc: func(event.TypedCreateEvent[*unstructured.Unstructured]) bool { return false },
	UpdateFunc: func(event.TypedUpdateEvent[*unstructured.Unstructured]) bool { return false },
}

// waitingRequests brings back, when the pool changes, the requests it serves that have
// no credential yet or have this one.
func (r *Reconciler) waitingRequests(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requestsWith(ctx, "", o.GetName())
}

// requestsWith lists the requests of namespace (all namespaces for "") that have no
// credential or have credential.
func (r *Reconciler) requestsWith(ctx context.Context, namespace, credential string) []reconcile.Request {
	list := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, sr := range list.Items {
		if n := sr.Status.GardenerSecretName; n == "" || (credential != "" && n == credential) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sr.Namespace, Name: sr.Name}})
		}
	}
	return out
}
