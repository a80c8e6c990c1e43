package cluster

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
)

// holdingChanged: the Clusters the request concerns changed, or status.grantedIn did. A
// request withdrawn from the Cluster it still names (one that stopped granting its
// namespace) changes only the latter.
func holdingChanged(old, updated *operatorv1alpha1.KubeconfigRequest) bool {
	return !slices.Equal(old.ClusterKeys(), updated.ClusterKeys()) || !ptr.Equal(old.Status.GrantedIn, updated.Status.GrantedIn)
}

// clusterOfShoot maps a Shoot to its Cluster through the labels Desired sets.
func clusterOfShoot(_ context.Context, s *unstructured.Unstructured) []reconcile.Request {
	l := s.GetLabels()
	if l[operatorv1alpha1.ClusterNamespaceLabel] == "" || l[operatorv1alpha1.ClusterNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[operatorv1alpha1.ClusterNamespaceLabel], Name: l[operatorv1alpha1.ClusterNameLabel]}}}
}

// clustersUsingSecret maps a kubeconfig Secret to the brought-along Clusters using it.
func (r *Reconciler) clustersUsingSecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &operatorv1alpha1.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{clustertarget.ClustersByKubeconfigRef: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, c := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}
	}
	return out
}
