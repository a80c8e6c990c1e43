package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
)

// ConditionClusterProvisioned is the Cluster's own condition beside Ready, Reconciling and
// Stalled: whether the cluster exists (a Gardener Shoot created, or one brought along).
const ConditionClusterProvisioned = "ClusterProvisioned"

// ConditionRegistryCacheConfigured is set on a Cluster with spec.registryCache: whether
// Gardener has reconciled the Shoot with its caches (infrastructure-manager's condition of
// the same name). It is removed with the last cache.
const ConditionRegistryCacheConfigured = "RegistryCacheConfigured"

// Reasons of ConditionRegistryCacheConfigured.
const (
	// ReasonRegistryCacheConfigured (True): Gardener reconciled the Shoot with the caches.
	ReasonRegistryCacheConfigured = "RegistryCacheConfigured"
	// ReasonRegistryCachePending (Unknown): the Shoot has the caches, and Gardener has not
	// reconciled it since.
	ReasonRegistryCachePending = "RegistryCachePending"
	// ReasonRegistryCacheConfigurationFailed (False): Gardener's last operation on the
	// Shoot with the caches failed; its message says why.
	ReasonRegistryCacheConfigurationFailed = "RegistryCacheConfigurationFailed"
)

// Reasons of a Cluster's conditions, beside the shared ones of package api/conditions.
const (
	// ReasonAdministratorsBound (Ready=True): the cluster exists and spec.administrators
	// are cluster-admin in it.
	ReasonAdministratorsBound = "AdministratorsBound"
	// ReasonProvisioned (ClusterProvisioned=True): Gardener created the Shoot.
	ReasonProvisioned = "Provisioned"
	// ReasonBroughtAlong (ClusterProvisioned=True): the cluster was brought along.
	ReasonBroughtAlong = "BroughtAlong"
	// ReasonProvisioning (Reconciling): Gardener is creating the Shoot.
	ReasonProvisioning = "Provisioning"
	// ReasonProvisioningError (Reconciling): Gardener's creation of the Shoot failed with
	// retryable errors only; Gardener, or the next change, retries.
	ReasonProvisioningError = "ProvisioningError"
	// ReasonProvisioningFailed (Stalled): Gardener gave the Shoot's creation up: an error
	// code it does not retry (named in the message, e.g. ERR_INFRA_UNAUTHORIZED), or Failed
	// without an error.
	ReasonProvisioningFailed = "ProvisioningFailed"
	// ReasonShootReconcileFailed (Stalled, the cluster provisioned): Gardener's reconcile of
	// the Shoot for this generation failed with an error code it does not retry; the
	// message names the codes (status.shootLastErrors has them all).
	ReasonShootReconcileFailed = "ShootReconcileFailed"
	// ReasonShootReconcileError (Reconciling, the cluster provisioned): Gardener's
	// reconcile of the Shoot for this generation failed; Gardener retries.
	ReasonShootReconcileError = "ShootReconcileError"
	// ReasonShootPatchSuspended (Reconciling): the annotation
	// operator.kyma-project.io/suspend-patch-reconciliation keeps the Shoot as it is,
	// though the Cluster asks for another.
	ReasonShootPatchSuspended = "ShootPatchSuspended"
	// ReasonShootPatchForced (Normal event): the annotation
	// operator.kyma-project.io/force-patch-reconciliation had the Shoot written again.
	ReasonShootPatchForced = "ShootPatchForced"
	// ReasonWaitingForSubscription (Reconciling): the hyperscaler credential is not assigned yet.
	ReasonWaitingForSubscription = "WaitingForSubscription"
	// ReasonKubeconfigMissing (Reconciling): the brought-along kubeconfig Secret or key
	// does not exist yet.
	ReasonKubeconfigMissing = "KubeconfigMissing"
	// ReasonKubeconfigInvalid (Stalled): the brought-along kubeconfig does not parse.
	ReasonKubeconfigInvalid = "KubeconfigInvalid"
	// ReasonInvalidSpec (Stalled): the spec is not one Gardener could provision, found
	// before the Shoot is written or in the garden's 422/400 answer to writing it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonAuditLogTenantMissing (Stalled, ClusterProvisioned and Ready): the operator's
	// landscape makes audit logging mandatory (landscape.auditLog.mandatory) and has no
	// audit-log tenant for the Cluster's provider and region, both named in the message;
	// no credential is claimed and no Shoot is written. The operator adds the tenant
	// (landscape.auditLog.tenants.<provider>.<region>); the restarted manager picks it up.
	ReasonAuditLogTenantMissing = "AuditLogTenantMissing"
	// ReasonGardenNotConfigured (Stalled): a Gardener Cluster, and the operator runs
	// without --garden-kubeconfig.
	ReasonGardenNotConfigured = "GardenNotConfigured"
	// ReasonGardenUnreachable (Reconciling): a call to the garden failed in a way retrying
	// may fix (no answer, a timeout, 429, 5xx); retried with backoff.
	ReasonGardenUnreachable = "GardenUnreachable"
	// ReasonGardenForbidden (Stalled): the garden refuses a write with 403 (RBAC in the
	// project, an admission plugin, webhook or policy); retried with backoff, since the
	// garden's rules change outside the Cluster.
	ReasonGardenForbidden = "GardenForbidden"
	// ReasonShootNameTaken (Stalled): a Shoot of the Cluster's name belongs to something else.
	ReasonShootNameTaken = "ShootNameTaken"
	// ReasonInsecureKubeconfig (Stalled): the brought-along kubeconfig uses what a tenant's
	// kubeconfig may not (a file, an exec plugin, an auth provider, impersonation, a proxy,
	// or turning TLS verification off without the operator's flag); the message names
	// the field.
	ReasonInsecureKubeconfig = "InsecureKubeconfig"
	// ReasonClusterUnreachable (Reconciling): a call to the cluster itself failed; retried.
	// For a brought-along cluster the message says only the kind of failure and the host.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonClusterAccessDenied (Stalled, retried with backoff): the cluster itself
	// answered 401 or 403 to the kubeconfig's credentials.
	ReasonClusterAccessDenied = "ClusterAccessDenied"
	// ReasonCleanupAbandoned (Warning event, deleting): the brought-along cluster could not
	// be reached within --cluster-deletion-cleanup-timeout; the administrators' bindings
	// were left in it and the Cluster went. Also: KubeconfigRequests of namespaces the
	// Cluster no longer grants still said they held grants in it after that time.
	ReasonCleanupAbandoned = "CleanupAbandoned"
	// ReasonOrphansDeleted (Normal event on a Cluster): objects in its cluster granted
	// through it to KubeconfigRequests that no longer exist were deleted (their tokens
	// with them); the event names them.
	ReasonOrphansDeleted = "OrphansDeleted"
	// ReasonInUse (Reconciling, deleting): KubeconfigRequests of the Cluster still exist;
	// or, for at most --cluster-deletion-cleanup-timeout, requests of namespaces it no
	// longer grants are withdrawing from it.
	ReasonInUse = "InUse"
	// ReasonDeprovisioning (Reconciling, deleting): the Shoot or the credential is going.
	ReasonDeprovisioning = "Deprovisioning"
)

// Reasons of a KubeconfigRequest's conditions, beside the shared ones of package
// api/conditions.
const (
	// ReasonIssued (Ready=True): a kubeconfig with exactly the requested rules is published.
	ReasonIssued = "Issued"
	// ReasonRevoked (Ready=False, reconciled): the revoke annotation is "true"; every
	// credential of the request is invalid.
	ReasonRevoked = "Revoked"
	// ReasonCredentialRevoked (event): the credential the revoke-credential annotation
	// names was revoked (its token binding deleted); the others stay valid.
	ReasonCredentialRevoked = "CredentialRevoked"
	// ReasonCredentialNotFound (Warning event): the revoke-credential annotation names no
	// live credential of the request (status.credentials); nothing was revoked.
	ReasonCredentialNotFound = "CredentialNotFound"
	// ReasonShootMismatch (Stalled, KubeconfigRequest): the Cluster's status.shootName is
	// not the Shoot the Cluster controller makes for it, or that Shoot is not labelled as
	// the Cluster's. A status is writable by whoever may write clusters/status; it never
	// chooses whose cluster an admin kubeconfig is asked for.
	ReasonShootMismatch = "ShootMismatch"
	// ReasonExpirationTooLong (Stalled, KubeconfigRequest): spec.expiration is over
	// --kubeconfig-max-expiration.
	ReasonExpirationTooLong = "ExpirationTooLong"
	// ReasonDenied (Stalled): the rules exceed the operator's ceiling, or the Cluster is
	// in another namespace and does not grant the request's namespace
	// (spec.kubeconfigRequestNamespaces). Whatever the request held is withdrawn.
	ReasonDenied = "Denied"
	// ReasonRevokePending (Reconciling): revoke is "true" and the kubeconfig is gone from
	// the status and the Secret; deleting the ServiceAccount, roles and token bindings in
	// the target cluster waits until it can be reached (the token is valid there until then).
	ReasonRevokePending = "RevokePending"
	// ReasonWithdrawalPending (Reconciling): spec.cluster changed; what the request holds in
	// the previous cluster must be deleted there before the new cluster is served.
	ReasonWithdrawalPending = "WithdrawalPending"
	// ReasonSecretNameTaken (Stalled): a Secret of the published name exists that the
	// request does not control; its deletion brings the request back.
	ReasonSecretNameTaken = "SecretNameTaken"
	// ReasonClusterNotReady (Reconciling): the Cluster does not exist, is not provisioned
	// yet, or cannot be connected to (Stalled: a Gardener Cluster, and the operator runs
	// without --garden-kubeconfig).
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonTargetUnreachable (Reconciling): a call to the target cluster failed; retried.
	ReasonTargetUnreachable = "TargetUnreachable"
	// ReasonTargetChanged (Normal event): the target's server, CA bundle or TLS server name
	// is no longer what the published kubeconfig was issued for, and a new one was issued.
	// Until it is, Ready is False (with the reason of what holds the new one up).
	ReasonTargetChanged = "TargetChanged"
	// ReasonClusterGone (Normal event, withdrawing): the Cluster the request's grants
	// lived in does not exist: there is nothing to clean up.
	ReasonClusterGone = "ClusterGone"
	// ReasonTargetNotCleanedUp (Warning event, withdrawing): the Cluster is going and no
	// way into its cluster is left: what the request held there stays.
	ReasonTargetNotCleanedUp = "TargetNotCleanedUp"
)

var (
	_ conditions.Object = &Cluster{}
	_ conditions.Object = &KubeconfigRequest{}
)

// GetConditions returns status.conditions.
func (c *Cluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces status.conditions.
func (c *Cluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetObservedGeneration returns status.observedGeneration.
func (c *Cluster) GetObservedGeneration() int64 { return c.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (c *Cluster) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// GetConditions returns status.conditions.
func (r *KubeconfigRequest) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces status.conditions.
func (r *KubeconfigRequest) SetConditions(conds []metav1.Condition) { r.Status.Conditions = conds }

// GetObservedGeneration returns status.observedGeneration.
func (r *KubeconfigRequest) GetObservedGeneration() int64 { return r.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (r *KubeconfigRequest) SetObservedGeneration(g int64) { r.Status.ObservedGeneration = g }

// GetLastHandledReconcileAt returns status.lastHandledReconcileAt.
func (c *Cluster) GetLastHandledReconcileAt() string { return c.Status.LastHandledReconcileAt }

// SetLastHandledReconcileAt sets status.lastHandledReconcileAt.
func (c *Cluster) SetLastHandledReconcileAt(at string) { c.Status.LastHandledReconcileAt = at }

var _ conditions.ReconcileRequestStatus = &Cluster{}

// GetLastHandledReconcileAt returns status.lastHandledReconcileAt.
func (r *KubeconfigRequest) GetLastHandledReconcileAt() string {
	return r.Status.LastHandledReconcileAt
}

// SetLastHandledReconcileAt sets status.lastHandledReconcileAt.
func (r *KubeconfigRequest) SetLastHandledReconcileAt(at string) {
	r.Status.LastHandledReconcileAt = at
}

var _ conditions.ReconcileRequestStatus = &KubeconfigRequest{}
