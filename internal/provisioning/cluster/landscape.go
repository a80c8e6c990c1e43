package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;patch

// landscapePublisher applies, once the manager leads, the ConfigMap of what its
// landscape allows that admission checks Clusters against
// (operatorv1alpha1.LandscapeConfigMap in the manager's namespace, the parameter of
// config/policy/cluster-versions.yaml): the leader's, as the leader's configuration is
// what reconciles. It retries until written: until then admission lets every version
// through and Validate stalls the Clusters above the newest.
type landscapePublisher struct {
	client    client.Client
	namespace string
	landscape shoot.Landscape
}

// Start applies the ConfigMap, with backoff from 1 s to 1 min, until it is written or the
// manager stops.
func (p *landscapePublisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName(Name)
	cm := p.configMap()
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: time.Minute}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := apply.Apply(ctx, p.client, cm.DeepCopy(), FieldOwner); err != nil {
			log.Error(err, "publishing the landscape for admission; retrying", "configMap", p.namespace+"/"+cm.Name)
			return false, nil
		}
		return true, nil
	})
	if ctx.Err() != nil {
		return nil // the manager stopped first
	}
	return err
}

// NeedLeaderElection: only the leader publishes.
func (p *landscapePublisher) NeedLeaderElection() bool { return true }

// configMap is the ConfigMap published.
func (p *landscapePublisher) configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.LandscapeConfigMap, Namespace: p.namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "trustplane", "app.kubernetes.io/component": Name}},
		Data: map[string]string{operatorv1alpha1.LandscapeNewestKubernetesVersionKey: p.landscape.NewestKubernetesVersion()}}
}

// addLandscapePublisher adds the publisher to mgr when the operator has a garden (its
// landscape is part of the garden's settings).
func (r *Reconciler) addLandscapePublisher(mgr ctrl.Manager) error {
	if r.Garden == nil {
		return nil
	}
	namespace := r.Options.LandscapeNamespace
	if namespace == "" {
		namespace = manager.OwnNamespace()
	}
	return mgr.Add(&landscapePublisher{client: mgr.GetClient(), namespace: namespace, landscape: r.Garden.Params.Landscape})
}
