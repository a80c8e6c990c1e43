package clustertarget

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

const (
	// ClustersByKubeconfigRef indexes Clusters by spec.kubeconfigSecretRef.name: from a
	// kubeconfig Secret to the brought-along Clusters it lets in.
	ClustersByKubeconfigRef = ".spec.kubeconfigSecretRef.name"
	// RequestsByCluster indexes KubeconfigRequests by "namespace/name" of the Cluster they
	// name and of the Cluster their grants still live in, across namespaces: a request may
	// name a Cluster in another namespace.
	RequestsByCluster = ".spec.cluster"
)

// AddIndexes registers ClustersByKubeconfigRef and RequestsByCluster with mgr. Call it
// once per manager, where the manager is assembled, before the controllers that list by
// them (cluster, kubeconfig) are set up: a field index can be registered only once.
func AddIndexes(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &operatorv1alpha1.Cluster{}, ClustersByKubeconfigRef, kubeconfigSecretOf); err != nil {
		return fmt.Errorf("indexing Clusters by %s: %w", ClustersByKubeconfigRef, err)
	}
	if err := indexer.IndexField(ctx, &operatorv1alpha1.KubeconfigRequest{}, RequestsByCluster, clustersOf); err != nil {
		return fmt.Errorf("indexing KubeconfigRequests by %s: %w", RequestsByCluster, err)
	}
	return nil
}

func kubeconfigSecretOf(o client.Object) []string {
	if ref := o.(*operatorv1alpha1.Cluster).Spec.KubeconfigSecretRef; ref != nil {
		return []string{ref.Name}
	}
	return nil
}

func clustersOf(o client.Object) []string {
	var keys []string
	for _, key := range o.(*operatorv1alpha1.KubeconfigRequest).ClusterKeys() {
		keys = append(keys, key.String())
	}
	return keys
}
