package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/status"
)

// broughtAlong checks the Cluster's own kubeconfig.
func (r *Reconciler) broughtAlong(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	cfg, err := clustertarget.BroughtAlongConfig(ctx, r.APIReader, c, r.Options.Kubeconfig)
	var missing *clustertarget.MissingSecretError
	var refused *tenantkubeconfig.RefusedError
	switch {
	case errors.As(err, &missing):
		// The Secret watch brings the Cluster back when it appears.
		return nil, waiting(c, operatorv1alpha1.ReasonKubeconfigMissing, err.Error())
	case errors.As(err, &refused):
		return nil, stall(c, operatorv1alpha1.ReasonInsecureKubeconfig, err.Error())
	case errors.Is(err, tenantkubeconfig.ErrInvalid):
		return nil, stall(c, operatorv1alpha1.ReasonKubeconfigInvalid, err.Error())
	case err != nil:
		return nil, err
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonBroughtAlong, "brought-along cluster at "+cfg.Host)
	return cfg, nil
}

// provision drives the Gardener path. A nil config without an error means the Cluster is
// provisioned and this generation's administrators are bound already.
func (r *Reconciler) provision(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	if r.Garden == nil {
		return nil, stall(c, operatorv1alpha1.ReasonGardenNotConfigured, "the Cluster has no kubeconfigSecretRef and the operator runs without --garden-kubeconfig")
	}
	if err := shoot.Validate(c.Spec, r.Garden.Params); err != nil {
		return nil, stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	if err := r.keepLegacyShoot(ctx, c); err != nil {
		return nil, err
	}
	// Before a credential is claimed: a Shoot without the audit logging the landscape
	// demands is never made.
	if err := shoot.CheckAuditLog(c.Spec, r.Garden.Params); err != nil {
		return nil, stall(c, operatorv1alpha1.ReasonAuditLogTenantMissing, err.Error())
	}
	sr, err := r.applySubscription(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := waitForSubscription(c, sr); err != nil {
		return nil, err
	}
	desired, err := shoot.Desired(c, r.Garden.Params, sr.Status.GardenerSecretName)
	var missing *shoot.AuditLogTenantMissingError
	switch {
	case errors.As(err, &missing):
		return nil, stall(c, operatorv1alpha1.ReasonAuditLogTenantMissing, err.Error())
	case err != nil:
		return nil, stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	if err := r.checkShootOwner(ctx, c, desired.GetName()); err != nil {
		return nil, err
	}
	if err := r.checkShootUpdate(ctx, c, desired); err != nil {
		return nil, err
	}
	// The OIDC ConfigMap first: Gardener refuses a Shoot naming one that does not exist.
	auth, err := r.applyAuthentication(ctx, c, desired)
	if err != nil {
		return nil, err
	}
	if err := r.applyShoot(ctx, c, desired); err != nil {
		return nil, err
	}
	if err := r.finishAuthentication(ctx, c, desired, auth); err != nil {
		return nil, err
	}
	c.Status.ShootName = desired.GetName()
	if err := followShoot(c, desired); err != nil {
		return nil, err
	}
	wasProvisioned := meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
	if !wasProvisioned {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonProvisioned, "Provision", "shoot %s is provisioned", desired.GetName())
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioned, "shoot "+desired.GetName()+": "+shoot.ProgressOf(desired).Message())
	// Gardener reports every step of its periodic reconciles on the Shoot; none of them
	// needs a new admin kubeconfig once this generation's administrators are bound.
	if ready := meta.FindStatusCondition(c.Status.Conditions, conditions.Ready); wasProvisioned && status.IsReadyForGeneration(c) &&
		ready.Reason == operatorv1alpha1.ReasonAdministratorsBound {
		return nil, nil
	}
	admin, _, err := r.Garden.AdminConfig(ctx, desired.GetName())
	if err != nil {
		return nil, gardenCallFailed(c, fmt.Errorf("admin kubeconfig: %w", err))
	}
	return admin, nil
}

// waitForSubscription waits until the Cluster's SubscriptionRequest has a credential; its
// status change brings the Cluster back.
func waitForSubscription(c *operatorv1alpha1.Cluster, sr *cp.SubscriptionRequest) error {
	ready := meta.FindStatusCondition(sr.Status.Conditions, conditions.Ready)
	if sr.Status.GardenerSecretName != "" && ready != nil && ready.Status == metav1.ConditionTrue {
		return nil
	}
	msg := "waiting for SubscriptionRequest " + sr.Name
	if ready != nil {
		msg += ": " + ready.Message
	}
	return waiting(c, operatorv1alpha1.ReasonWaitingForSubscription, msg)
}

// followShoot reports the Shoot's last operation until it is provisioned; the Shoot watch
// brings the Cluster back at every step.
func followShoot(c *operatorv1alpha1.Cluster, s *unstructured.Unstructured) error {
	progress := shoot.ProgressOf(s)
	switch {
	case progress.Provisioned():
		return nil
	case progress.Phase == shoot.PhaseFailed:
		return stall(c, operatorv1alpha1.ReasonProvisioningFailed, progress.Message())
	case progress.Phase == shoot.PhaseError: // Gardener retries
		return waiting(c, operatorv1alpha1.ReasonProvisioningError, progress.Message())
	default:
		return waiting(c, operatorv1alpha1.ReasonProvisioning, progress.Message())
	}
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

// keepLegacyShoot keeps a Cluster whose Shoot an earlier version created under the
// legacy name on that Shoot, even where the status naming it was never stored (that
// version wrote it only after the Shoot was made): a Shoot of the legacy name labelled as
// this Cluster's. Params.NameOf then names it.
func (r *Reconciler) keepLegacyShoot(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	if c.Status.ShootName != "" {
		return nil
	}
	legacy := shoot.LegacyName(c.Namespace, c.Name)
	live, err := clustertarget.ShootOf(ctx, r.Garden.Cache, r.Garden, c, legacy)
	var notOwned *clustertarget.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		return nil // someone else's: this Cluster gets its own new name
	case err != nil:
		return gardenUnreachable(c, err)
	case live != nil:
		c.Status.ShootName = legacy
	}
	return nil
}

// applySubscription asks for the Cluster's hyperscaler credential.
func (r *Reconciler) applySubscription(ctx context.Context, c *operatorv1alpha1.Cluster) (*cp.SubscriptionRequest, error) {
	selector := c.Spec.Infrastructure.SubscriptionSelector
	if selector == "" {
		selector = "shared"
	}
	sr := &cp.SubscriptionRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: cp.GroupVersion.String(), Kind: "SubscriptionRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, operatorv1alpha1.GroupVersion.WithKind("Cluster"))}},
		// The region selects a regional pool (hyperscalerType <provider>_<region>) where there
		// is one; an EU-access Cluster (its platform region, landscape.euAccess) takes its
		// credential from the EU-access pool, as kyma-environment-broker does.
		Spec: cp.SubscriptionRequestSpec{Provider: c.Spec.Infrastructure.Provider, SubscriptionSelector: selector, Region: c.Spec.Core.Region,
			EUAccess: r.Garden != nil && shoot.EUAccessOnly(c, r.Garden.Params)},
	}
	if err := apply.Apply(ctx, r.Client, sr, FieldOwner); err != nil {
		return nil, status.WriteFailed("apply", sr, err)
	}
	return sr, nil
}

// bindAdministrators makes the cluster's cluster-admin bindings match the administrators:
// it applies one per administrator and deletes only bindings it made for former ones.
func bindAdministrators(ctx context.Context, cfg *rest.Config, owner string, administrators []string) error {
	target, closeIdle, err := clustertarget.Dial(cfg)
	if err != nil {
		return err
	}
	defer closeIdle()
	want := access.AdminBindings(owner, administrators)
	names := make([]string, len(want))
	for i := range want {
		names[i] = want[i].Name
		if err := apply.Apply(ctx, target, &want[i], FieldOwner); err != nil {
			return status.WriteFailed("apply", &want[i], err)
		}
	}
	return removeAdministratorsExcept(ctx, target, owner, names)
}

func removeAdministratorsExcept(ctx context.Context, target client.Client, owner string, keep []string) error {
	have := &rbacv1.ClusterRoleBindingList{}
	if err := target.List(ctx, have, client.MatchingLabels{access.AdministratorLabel: owner}); err != nil {
		return fmt.Errorf("listing administrator bindings: %w", err)
	}
	for i := range have.Items {
		if !slices.Contains(keep, have.Items[i].Name) {
			if err := client.IgnoreNotFound(target.Delete(ctx, &have.Items[i])); err != nil {
				return status.WriteFailed("delete", &have.Items[i], err)
			}
		}
	}
	return nil
}
