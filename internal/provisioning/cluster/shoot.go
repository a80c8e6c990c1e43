package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/status"
)

// desireShoot computes the Shoot (shoot.Desired) from the spec, the credential and the
// operator's settings, and refuses a Shoot of that name made for something else or a
// change Gardener would refuse on the existing Shoot.
func (r *Reconciler) desireShoot(ctx context.Context, s *scope) error {
	c := s.c
	desired, err := shoot.Desired(c, r.Garden.Params, s.sr.Status.GardenerSecretName)
	var missing *shoot.AuditLogTenantMissingError
	switch {
	case errors.As(err, &missing):
		return stall(c, operatorv1alpha1.ReasonAuditLogTenantMissing, err.Error())
	case err != nil:
		return stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	if err := r.checkShootOwner(ctx, c, desired.GetName()); err != nil {
		return err
	}
	if err := r.checkShootUpdate(ctx, c, desired); err != nil {
		return err
	}
	s.desired = desired
	return nil
}

// checkShootOwner refuses to take over a Shoot of the same name made for something else.
func (r *Reconciler) checkShootOwner(ctx context.Context, c *operatorv1alpha1.Cluster, name string) error {
	_, err := clustertarget.ShootOf(ctx, r.Garden.Cache, r.Garden, c, name)
	var notOwned *clustertarget.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		return stall(c, operatorv1alpha1.ReasonShootNameTaken, fmt.Sprintf("shoot %s exists and does not belong to this Cluster; not taking it over", notOwned.Shoot))
	case err != nil:
		return gardenUnreachable(c, err)
	}
	return nil
}

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

// applyShoot writes the desired Shoot to the garden unless the live Shoot already carries
// its hash. Either way scope.desired holds the Shoot as the garden has it afterwards (its
// status included), for the provisioned phase to follow.
func (r *Reconciler) applyShoot(ctx context.Context, s *scope) error {
	c, desired := s.c, s.desired
	hash, err := desiredHash(desired)
	if err != nil {
		return fmt.Errorf("hashing the desired shoot %s: %w", desired.GetName(), err)
	}
	live := garden.NewShoot()
	err = r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
	forced := c.Annotations[operatorv1alpha1.ForcePatchAnnotation] == "true"
	switch {
	case err == nil && live.GetAnnotations()[operatorv1alpha1.DesiredHashAnnotation] == hash && !forced:
		desired.Object = live.Object
		return nil
	case err == nil && c.Annotations[operatorv1alpha1.SuspendPatchAnnotation] == "true":
		// Creating the Shoot is not patching it; changing it is what is suspended.
		desired.Object = live.Object
		s.suspended = true
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", desired.GetName(), err))
	}
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[operatorv1alpha1.DesiredHashAnnotation] = hash
	desired.SetAnnotations(annotations)
	if err := r.Garden.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return gardenWriteFailed(c, "apply", desired, err)
	}
	if forced {
		return r.forgetForcePatch(ctx, c, desired.GetName())
	}
	return nil
}

// forgetForcePatch removes the force-patch annotation once the Shoot was written, as
// infrastructure-manager does, with a Normal event: the next reconcile writes the Shoot
// only if it differs again.
func (r *Reconciler) forgetForcePatch(ctx context.Context, c *operatorv1alpha1.Cluster, shootName string) error {
	patch := client.MergeFrom(c.DeepCopy())
	delete(c.Annotations, operatorv1alpha1.ForcePatchAnnotation)
	if err := r.Client.Patch(ctx, c, patch); err != nil {
		return status.WriteFailed("patch", c, err)
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonShootPatchForced, "ForcePatch",
		"shoot %s written again as annotation %s asked; annotation removed", shootName, operatorv1alpha1.ForcePatchAnnotation)
	return nil
}

// desiredHash is a hash of the Shoot's metadata (labels, annotations) and spec as applied;
// encoding/json sorts map keys, so equal Shoots hash alike.
func desiredHash(desired *unstructured.Unstructured) (string, error) {
	raw, err := json.Marshal(map[string]any{
		"labels": desired.GetLabels(), "annotations": desired.GetAnnotations(), "spec": desired.Object["spec"],
	})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16]), nil
}

// followShoot reports the Shoot's last operation until it is provisioned; the Shoot watch
// brings the Cluster back at every step. Once it is, a Cluster whose administrators are
// bound for this generation is done: Gardener reports every step of its periodic
// reconciles on the Shoot, and none of them needs a new admin kubeconfig.
func (r *Reconciler) followShoot(_ context.Context, s *scope) error {
	c, desired := s.c, s.desired
	c.Status.ShootName = desired.GetName()
	c.Status.ShootLastOperation, c.Status.ShootLastErrors = shoot.StatusOf(desired)
	reportRegistryCache(c, desired)
	progress, failure := shoot.ProgressOf(desired), shoot.FailureOf(desired)
	switch {
	case progress.Provisioned():
	case failure.Stalled:
		return stall(c, operatorv1alpha1.ReasonProvisioningFailed, failure.Message)
	case failure.Retrying:
		return waiting(c, operatorv1alpha1.ReasonProvisioningError, failure.Message)
	default:
		return waiting(c, operatorv1alpha1.ReasonProvisioning, progress.Message())
	}
	wasProvisioned := meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
	if !wasProvisioned {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonProvisioned, "Provision", "shoot %s is provisioned", desired.GetName())
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioned, "shoot "+desired.GetName()+": "+progress.Message())
	if s.suspended {
		return status.Waiting(operatorv1alpha1.ReasonShootPatchSuspended, "shoot %s is kept as it is: annotation %s is \"true\"; remove it to have the shoot follow the Cluster",
			desired.GetName(), operatorv1alpha1.SuspendPatchAnnotation)
	}
	// A reconcile of the Shoot as this generation wrote it that failed: the cluster
	// serves, but not as the Cluster asks.
	if done, failed := shoot.SpecReconciled(desired); !done && failed {
		if failure.Stalled {
			return status.Stalled(operatorv1alpha1.ReasonShootReconcileFailed, "shoot %s: %s", desired.GetName(), failure.Message)
		}
		return status.Waiting(operatorv1alpha1.ReasonShootReconcileError, "shoot %s: %s", desired.GetName(), failure.Message)
	}
	if ready := meta.FindStatusCondition(c.Status.Conditions, conditions.Ready); wasProvisioned && status.IsReadyForGeneration(c) &&
		ready.Reason == operatorv1alpha1.ReasonAdministratorsBound {
		s.done = true
	}
	return nil
}

// reportRegistryCache sets RegistryCacheConfigured from the live Shoot, which carries the
// Cluster's caches (applyShoot): whether Gardener reconciled it since, and how that ended.
// A Cluster without caches has no such condition.
func reportRegistryCache(c *operatorv1alpha1.Cluster, live *unstructured.Unstructured) {
	if len(c.Spec.RegistryCache) == 0 {
		meta.RemoveStatusCondition(&c.Status.Conditions, operatorv1alpha1.ConditionRegistryCacheConfigured)
		return
	}
	upstreams := make([]string, len(c.Spec.RegistryCache))
	for i, cache := range c.Spec.RegistryCache {
		upstreams[i] = cache.Upstream
	}
	caches := fmt.Sprintf("registry caches of %s in shoot %s", strings.Join(upstreams, ", "), live.GetName())
	switch done, failed := shoot.SpecReconciled(live); {
	case done:
		status.Set(c, operatorv1alpha1.ConditionRegistryCacheConfigured, metav1.ConditionTrue, operatorv1alpha1.ReasonRegistryCacheConfigured, caches+" are configured")
	case failed:
		status.Set(c, operatorv1alpha1.ConditionRegistryCacheConfigured, metav1.ConditionFalse, operatorv1alpha1.ReasonRegistryCacheConfigurationFailed,
			caches+": Gardener's last operation failed: "+shoot.ProgressOf(live).Message())
	default:
		status.Set(c, operatorv1alpha1.ConditionRegistryCacheConfigured, metav1.ConditionUnknown, operatorv1alpha1.ReasonRegistryCachePending, caches+": waiting for Gardener to reconcile the shoot")
	}
}

// adminAccess connects to the Shoot through a short-lived admin kubeconfig, kept in
// memory only (the connection cache, clustertarget.Connections: reused for half its
// lifetime).
func (r *Reconciler) adminAccess(ctx context.Context, s *scope) error {
	admin, err := r.targets.Shoot(ctx, s.c, s.desired.GetName())
	if err != nil {
		return gardenCallFailed(s.c, fmt.Errorf("admin kubeconfig: %w", err))
	}
	s.admin = admin
	return nil
}
