package cluster

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trustplane/trustplane/api/conditions"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/status"
)

// scope is one reconcile of a Cluster, as its phases share it.
type scope struct {
	c *operatorv1alpha1.Cluster
	// sr is the Cluster's SubscriptionRequest, with its credential.
	sr *cp.SubscriptionRequest
	// desired is the Shoot as it is to be (then as the garden has it, once applied).
	desired *unstructured.Unstructured
	// auth is the structured-authentication step of the Shoot apply.
	auth *authentication
	// admin is the cluster-admin connection to the Cluster's cluster.
	admin *clustertarget.Target
	// suspended: the Shoot differs from the Cluster's and was left as it is
	// (operatorv1alpha1.SuspendPatchAnnotation).
	suspended bool
	// done ends the reconcile, successfully, after the phase that set it.
	done bool
}

// phase is one step of a reconcile. A phase ends the reconcile when it returns an error
// (a wait is one: status.Waiting) or sets scope.done; otherwise the next one runs.
type phase struct {
	name string
	run  func(ctx context.Context, s *scope) error
}

// run runs the phases in order.
func run(ctx context.Context, phases []phase, s *scope) error {
	for _, p := range phases {
		if err := p.run(ctx, s); err != nil || s.done {
			return err
		}
	}
	return nil
}

// phasesFor are the steps that provision (or adopt) c: a brought-along cluster's own
// kubeconfig (this file), or Gardener's path — the spec, the credential (this file), the
// Shoot (shoot.go) with its OIDC (oidc.go) — then the administrators (administrators.go).
func (r *Reconciler) phasesFor(c *operatorv1alpha1.Cluster) []phase {
	if c.Spec.KubeconfigSecretRef != nil {
		return []phase{
			{"kubeconfig", r.broughtAlong},
			{"administrators", r.bindAdministrators},
		}
	}
	return []phase{
		{"spec", r.checkSpec},
		{"subscription", r.subscription},
		{"shoot-desired", r.desireShoot},
		{"authentication", r.applyAuthentication},
		{"shoot", r.applyShoot},
		{"authentication-cleanup", r.finishAuthentication},
		{"provisioned", r.followShoot},
		{"admin-access", r.adminAccess},
		{"administrators", r.bindAdministrators},
	}
}

// deprovisionPhases are the steps of a deletion (deprovision.go): KubeconfigRequests
// first (they clean up inside the cluster), then the administrators' bindings or the
// Shoot, then the credential. Each step it waits for ends with a watched change.
func (r *Reconciler) deprovisionPhases(c *operatorv1alpha1.Cluster) []phase {
	phases := []phase{{"wait-for-requests", r.waitForRequests}}
	if c.Spec.KubeconfigSecretRef != nil {
		phases = append(phases, phase{"unbind", r.unbindBroughtAlong})
	} else {
		phases = append(phases, phase{"delete-shoot", r.deleteShoot}, phase{"delete-authentication", r.deleteAuthentication})
	}
	return append(phases, phase{"release-subscription", r.releaseSubscription}, phase{"release", r.release})
}

// broughtAlong connects to the cluster through the Cluster's own kubeconfig (the
// connection cache, clustertarget.Connections): a kubeconfig missing, refused or broken
// stops the Cluster until its Secret changes.
func (r *Reconciler) broughtAlong(ctx context.Context, s *scope) error {
	c := s.c
	target, err := r.targets.BroughtAlong(ctx, c)
	var missing *clustertarget.MissingSecretError
	var refused *tenantkubeconfig.RefusedError
	switch {
	case errors.As(err, &missing):
		// The Secret watch brings the Cluster back when it appears.
		return waiting(c, operatorv1alpha1.ReasonKubeconfigMissing, err.Error())
	case errors.As(err, &refused):
		return stall(c, operatorv1alpha1.ReasonInsecureKubeconfig, err.Error())
	case errors.Is(err, tenantkubeconfig.ErrInvalid):
		return stall(c, operatorv1alpha1.ReasonKubeconfigInvalid, err.Error())
	case err != nil:
		return err
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonBroughtAlong, "brought-along cluster at "+target.Config.Host)
	s.admin = target
	return nil
}

// checkSpec: a garden is configured, the spec is one Gardener takes, a Shoot an earlier
// version made keeps its name, and the audit logging the landscape demands is there —
// before a credential is claimed: a Shoot without it is never made.
func (r *Reconciler) checkSpec(ctx context.Context, s *scope) error {
	c := s.c
	if r.Garden == nil {
		return stall(c, operatorv1alpha1.ReasonGardenNotConfigured, "the Cluster has no kubeconfigSecretRef and the operator runs without --garden-kubeconfig")
	}
	if err := shoot.Validate(c.Spec, r.Garden.Params); err != nil {
		return stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	if err := r.keepLegacyShoot(ctx, c); err != nil {
		return err
	}
	if err := shoot.CheckAuditLog(c.Spec, r.Garden.Params); err != nil {
		return stall(c, operatorv1alpha1.ReasonAuditLogTenantMissing, err.Error())
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

// subscription asks for the Cluster's hyperscaler credential and waits until its
// SubscriptionRequest has one; its status change brings the Cluster back.
func (r *Reconciler) subscription(ctx context.Context, s *scope) error {
	sr, err := r.applySubscription(ctx, s.c)
	if err != nil {
		return err
	}
	s.sr = sr
	return waitForSubscription(s.c, sr)
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
