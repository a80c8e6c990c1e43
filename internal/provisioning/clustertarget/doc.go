// Package clustertarget is the one way into the cluster a Cluster stands for, its target:
// through a brought-along Cluster's kubeconfig Secret, read under the tenant kubeconfig
// policy (internal/provisioning/tenantkubeconfig), or through a Gardener Cluster's short-lived admin
// kubeconfig, kept in memory only (internal/provisioning/garden). It holds:
//
//   - BroughtAlongConfig: the rest.Config of a brought-along Cluster, and which of its
//     errors only a change to the Secret can fix (IsKubeconfigUnusable);
//   - ShootOf: a Gardener Cluster's Shoot, refusing one labelled for another Cluster;
//   - Connections: a connection per Cluster (a TLS handshake and API discovery saved per
//     reconcile), for controllers that act in the target again and again;
//   - Dial: a connection for one reconcile, closed when done;
//   - the field indexes from a kubeconfig Secret to its Clusters and from a Cluster to
//     the KubeconfigRequests concerning it (AddIndexes), registered once per manager by
//     whoever assembles it.
//
// The cluster controller and the kubeconfig controller both use it; neither imports the
// other.
package clustertarget
