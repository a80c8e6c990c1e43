package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/status"
)

// waitForRequests holds the deletion while KubeconfigRequests of namespaces the Cluster
// grants still name it or hold grants in it (like PVC protection); the KubeconfigRequest
// watch brings the Cluster back. A request of a namespace it does not grant holds nothing
// for certain, whatever its status says (KubeconfigRequest.Holds); see waitForClaims.
func (r *Reconciler) waitForRequests(ctx context.Context, s *scope) error {
	c := s.c
	requests := &operatorv1alpha1.KubeconfigRequestList{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if err := r.Client.List(ctx, requests, client.MatchingFields{clustertarget.RequestsByCluster: key.String()}); err != nil {
		return fmt.Errorf("listing the KubeconfigRequests of the Cluster: %w", err)
	}
	var holding, claiming []string
	for i := range requests.Items {
		switch kr := &requests.Items[i]; {
		case kr.Holds(c):
			holding = append(holding, requestName(kr, c))
		case kr.ClaimsGrantsIn(c):
			claiming = append(claiming, requestName(kr, c))
		}
	}
	if len(holding) > 0 {
		slices.Sort(holding)
		return status.Waiting(operatorv1alpha1.ReasonInUse, "deletion waits for %d KubeconfigRequests of this cluster to be deleted: %s", len(holding), strings.Join(holding, ", "))
	}
	return r.waitForClaims(c, claiming)
}

// waitForClaims bounds the wait for requests of namespaces the Cluster no longer grants
// whose status says their grants still live in it. That is so while their withdrawal is
// under way, and also when a status is forged: only the manager should write one (the
// admission policy trustplane-status-writers), but this controller does not count on the
// policy being installed, so a claim never holds the Cluster for good. A Gardener
// Cluster does not wait at all: deleting its Shoot deletes whatever they hold there. A
// brought-along cluster outlives its Cluster, so they get the time its own
// administrators' bindings get (--cluster-deletion-cleanup-timeout after the deletion);
// then the deletion goes on, with a Warning event naming them.
func (r *Reconciler) waitForClaims(c *operatorv1alpha1.Cluster, claiming []string) error {
	if len(claiming) == 0 || c.Spec.KubeconfigSecretRef == nil {
		return nil
	}
	slices.Sort(claiming)
	deadline := c.DeletionTimestamp.Add(r.Options.DeletionCleanupTimeout)
	if now := r.now(); now.Before(deadline) {
		return status.Waiting(operatorv1alpha1.ReasonInUse, "deletion waits until %s for %d KubeconfigRequests of namespaces this cluster no longer grants to withdraw from it: %s",
			deadline.UTC().Format(time.RFC3339), len(claiming), strings.Join(claiming, ", ")).After(deadline.Sub(now))
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCleanupAbandoned, "Delete",
		"stopped waiting after %v for %d KubeconfigRequests of namespaces this cluster no longer grants, whose status says they hold grants in it (what they hold there, if anything, stays in the cluster): %s",
		r.Options.DeletionCleanupTimeout, len(claiming), strings.Join(claiming, ", "))
	return nil
}

// requestName names a request as the Cluster reports it: its name in the Cluster's own
// namespace, namespace/name from another.
func requestName(kr *operatorv1alpha1.KubeconfigRequest, c *operatorv1alpha1.Cluster) string {
	if kr.Namespace == c.Namespace {
		return kr.Name
	}
	return kr.Namespace + "/" + kr.Name
}

func (r *Reconciler) now() time.Time { return r.clock().Now() }

// clock is the configured clock, the real one if none is.
func (r *Reconciler) clock() clock.PassiveClock {
	if r.Options.Clock != nil {
		return r.Options.Clock
	}
	return clock.RealClock{}
}

// releaseSubscription deletes the Cluster's SubscriptionRequest, which releases the
// credential, and waits until it is gone (its watch brings the Cluster back). The
// request is gone only if the API server says so: a Cluster deleted right after its
// request was created may find the cache not yet showing it; going on then would leave
// the request, and its credential, to the garbage collector, if the cluster runs one.
func (r *Reconciler) releaseSubscription(ctx context.Context, s *scope) error {
	c := s.c
	sr := &cp.SubscriptionRequest{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	err := r.Client.Get(ctx, key, sr)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, sr)
	}
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(sr, c)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading SubscriptionRequest %s: %w", c.Name, err)
	}
	if sr.DeletionTimestamp.IsZero() {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, sr)); err != nil {
			return status.WriteFailed("delete", sr, err)
		}
	}
	return status.Waiting(operatorv1alpha1.ReasonDeprovisioning, "releasing the hyperscaler credential")
}

// unbindBroughtAlong removes the administrators' bindings from a brought-along cluster,
// which outlives its Cluster. A kubeconfig that is gone, broken or refused cannot be
// used; that is reported and the deletion goes on. A cluster that cannot be reached is
// tried again with backoff until --cluster-deletion-cleanup-timeout after the deletion,
// then the deletion goes on with a Warning event saying what was left: a tenant's dead
// cluster must not keep its Cluster (and namespace) forever.
func (r *Reconciler) unbindBroughtAlong(ctx context.Context, s *scope) error {
	c := s.c
	target, err := r.targets.BroughtAlong(ctx, c)
	if clustertarget.IsKubeconfigUnusable(err) || errors.Is(err, clustertarget.ErrNoWayIn) {
		reason := operatorv1alpha1.ReasonKubeconfigMissing
		if refused := (*tenantkubeconfig.RefusedError)(nil); errors.As(err, &refused) {
			reason = operatorv1alpha1.ReasonInsecureKubeconfig
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, reason, "Delete", "administrator bindings left in the cluster: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	err = r.sweepOrphans(ctx, target.Client, c)
	if err == nil {
		err = applyAdministrators(ctx, target.Client, access.AdministratorsOf(c.Namespace, c.Name), nil)
	}
	if err == nil {
		return nil
	}
	failed := targetFailed("removing administrator bindings and what KubeconfigRequests that no longer exist left", target, err)
	if r.now().Before(c.DeletionTimestamp.Add(r.Options.DeletionCleanupTimeout)) {
		return failed
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCleanupAbandoned, "Delete",
		"gave up removing the cluster-admin bindings of %d administrators (label %s=%s) from the cluster after %v: %v",
		len(c.Spec.Administrators), operatorv1alpha1.AdministratorLabel, access.AdministratorsOf(c.Namespace, c.Name), r.Options.DeletionCleanupTimeout, failed)
	return nil
}

// sweepOrphans deletes what KubeconfigRequests that no longer exist were granted through
// c (clustertarget.SweepOrphans): the requests that still exist withdrew before the
// deletion went on (waitForRequests), and a brought-along cluster outlives its Cluster.
func (r *Reconciler) sweepOrphans(ctx context.Context, target client.Client, c *operatorv1alpha1.Cluster) error {
	deleted, err := clustertarget.SweepOrphans(ctx, target, r.APIReader, c)
	if len(deleted) > 0 {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonOrphansDeleted, "Delete",
			"deleted %d objects granted to KubeconfigRequests that no longer exist: %s", len(deleted), status.Truncate(clustertarget.Sorted(deleted), 800))
	}
	return err
}

// deleteShoot confirms and deletes the Cluster's Shoot and waits until it is gone (the
// Shoot watch brings the Cluster back). A Shoot of that name that belongs to something
// else is never touched.
func (r *Reconciler) deleteShoot(ctx context.Context, s *scope) error {
	c := s.c
	if r.Garden == nil {
		if c.Status.ShootName == "" {
			return nil // never provisioned
		}
		return status.Stalled(operatorv1alpha1.ReasonGardenNotConfigured, "shoot %s cannot be deleted: the operator runs without --garden-kubeconfig", c.Status.ShootName)
	}
	if err := r.keepLegacyShoot(ctx, c); err != nil {
		return err
	}
	name := r.Garden.Params.NameOf(c)
	live, err := clustertarget.ShootOf(ctx, r.Garden.Client, r.Garden, c, name)
	var notOwned *clustertarget.NotOwnedError
	switch {
	case live == nil && err == nil, errors.As(err, &notOwned):
		return nil // gone, or never this Cluster's
	case err != nil:
		return gardenUnreachable(c, err)
	}
	if live.GetDeletionTimestamp() == nil {
		// Gardener refuses to delete a Shoot that does not carry the confirmation.
		confirm := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+operatorv1alpha1.ConfirmDeletionAnnotation+`":"true"}}}`))
		if err := r.Garden.Client.Patch(ctx, live, confirm); err != nil {
			return gardenWriteFailed(c, "confirm the deletion of", live, err)
		}
		if err := client.IgnoreNotFound(r.Garden.Client.Delete(ctx, live)); err != nil {
			return gardenWriteFailed(c, "delete", live, err)
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonDeprovisioning, "Delete", "deleting shoot %s", name)
	}
	msg := "deleting shoot " + name
	if p := shoot.ProgressOf(live); p.Phase == shoot.PhaseDeleting {
		msg += ": " + p.Message()
	}
	return waiting(c, operatorv1alpha1.ReasonDeprovisioning, msg)
}

// release ends the deletion: the connection to the cluster is forgotten (its credentials,
// its sockets) and the finalizer released.
func (r *Reconciler) release(ctx context.Context, s *scope) error {
	c := s.c
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonDeprovisioning, "Delete", "deprovisioned")
	r.targets.Evict(types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	return Finalizer.Release(ctx, r.Client, c)
}
