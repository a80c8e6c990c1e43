package kubeconfig

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
)

// deletions passes only delete events.
var deletions = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// bringBackRequestsOf has every request of the Cluster reconciled again (a brought-along
// Cluster's do not need it: the watch on its kubeconfig Secret brings them back).
func (r *Reconciler) bringBackRequestsOf(ctx context.Context, cluster *operatorv1alpha1.Cluster) {
	select {
	case r.endpointChanges <- event.GenericEvent{Object: cluster}:
	default: // nil (not set up) or full: left to each request's next reconcile
		ctrl.LoggerFrom(ctx).Info("could not bring back the KubeconfigRequests of a Cluster whose endpoint changed", "cluster", cluster.Name)
	}
}

func (r *Reconciler) requestsForCluster(ctx context.Context, o client.Object) []reconcile.Request {
	list := &operatorv1alpha1.KubeconfigRequestList{}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	if err := r.Client.List(ctx, list, client.MatchingFields{clustertarget.RequestsByCluster: key.String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the KubeconfigRequests of a Cluster", "cluster", key)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, kr := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: kr.Namespace, Name: kr.Name}}
	}
	return out
}

// requestsUsingKubeconfigSecret maps a Secret to the requests of the brought-along
// Clusters whose kubeconfig it is.
func (r *Reconciler) requestsUsingKubeconfigSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	clusters := &operatorv1alpha1.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(secret.GetNamespace()), client.MatchingFields{clustertarget.ClustersByKubeconfigRef: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Clusters of a kubeconfig Secret", "secret", secret.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range clusters.Items {
		out = append(out, r.requestsForCluster(ctx, &clusters.Items[i])...)
	}
	return out
}

// requestPublishingIn maps a Secret to the request that publishes its kubeconfig under
// that name, if any.
func requestPublishingIn(_ context.Context, secret client.Object) []reconcile.Request {
	name, ok := strings.CutSuffix(secret.GetName(), publishedNameSuffix)
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: secret.GetNamespace(), Name: name}}}
}
