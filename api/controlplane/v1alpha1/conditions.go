package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
)

// Reasons of a SubscriptionRequest's conditions and events, beside the shared ones of
// package api/conditions.
const (
	// ReasonAssigned (Ready=True): status.gardenerSecretName is the request's credential.
	ReasonAssigned = "Assigned"
	// ReasonPoolExhausted (Reconciling): no credential of the pool fits; any change in the
	// pool brings the request back.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonInvalidSelector (Stalled): spec.subscriptionSelector does not parse.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonGlobalAccountNotGranted (Reconciling): the request asks for a credential
	// dedicated to a global account its namespace is not granted
	// (AnnotationGlobalAccounts); nothing is claimed, and a change of the Namespace's
	// annotation brings the request back.
	ReasonGlobalAccountNotGranted = "GlobalAccountNotGranted"
	// ReasonWaitingForShoot (Reconciling, deleting): the request's own Shoot still uses
	// the credential; whether it becomes dirty is decided once the Shoot is gone.
	ReasonWaitingForShoot = "WaitingForShoot"
	// ReasonReleaseTimedOut (Warning event, deleting): the request's own Shoot still used
	// its credential after --subscription-release-shoot-timeout; the credential was
	// released anyway (marked dirty only if nothing else uses it).
	ReasonReleaseTimedOut = "ReleaseTimedOut"
	// ReasonDirtyQuotaReached (Reconciling): the request's namespace holds as many dirty
	// credentials as --subscription-dirty-quota-per-namespace allows; no new credential is
	// claimed for it until one is handed back. The message names the namespace, the
	// credentials and the quota.
	ReasonDirtyQuotaReached = "DirtyQuotaReached"
	// ReasonPoolOnHold (Reconciling, and a Warning event): the operator holds the pool
	// (AnnotationPoolHold); the request's claim, or its deleted request's release, waits
	// until the hold is lifted. A credential already assigned stays assigned.
	ReasonPoolOnHold = "PoolOnHold"
	// ReasonReleased (event): a dedicated credential was marked dirty on release.
	ReasonReleased = "Released"
)

var _ conditions.Object = &SubscriptionRequest{}

// GetConditions returns status.conditions.
func (r *SubscriptionRequest) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces status.conditions.
func (r *SubscriptionRequest) SetConditions(conds []metav1.Condition) { r.Status.Conditions = conds }

// GetObservedGeneration returns status.observedGeneration.
func (r *SubscriptionRequest) GetObservedGeneration() int64 { return r.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (r *SubscriptionRequest) SetObservedGeneration(g int64) { r.Status.ObservedGeneration = g }

// GetLastHandledReconcileAt returns status.lastHandledReconcileAt.
func (r *SubscriptionRequest) GetLastHandledReconcileAt() string {
	return r.Status.LastHandledReconcileAt
}

// SetLastHandledReconcileAt sets status.lastHandledReconcileAt.
func (r *SubscriptionRequest) SetLastHandledReconcileAt(at string) {
	r.Status.LastHandledReconcileAt = at
}

var _ conditions.ReconcileRequestStatus = &SubscriptionRequest{}
