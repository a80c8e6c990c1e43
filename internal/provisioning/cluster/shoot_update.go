package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// checkShootUpdate stalls a Cluster whose change Gardener would refuse on the existing
// Shoot (a new region, fewer zones, other CIDRs), naming every such change, before the
// garden is asked. The Shoot is left as it is. Where only the operator's settings changed
// what Gardener would refuse (the cloud profile, the DNS domain) or Gardener moved on (a
// newer Kubernetes or machine image version), desired keeps the existing Shoot's
// (shoot.KeepLive): those settings apply to new Shoots.
func (r *Reconciler) checkShootUpdate(ctx context.Context, c *operatorv1alpha1.Cluster, desired *unstructured.Unstructured) error {
	live := garden.NewShoot()
	err := r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", desired.GetName(), err))
	}
	shoot.KeepLive(live, desired)
	if err := shoot.CheckUpdate(live, desired); err != nil {
		return stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	return nil
}
