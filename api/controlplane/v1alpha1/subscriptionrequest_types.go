package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Labels on pool credentials (the garden's CredentialsBindings, or Secrets in the
// Secret-pool mode), as kyma-environment-broker's hyperscaler account pool uses them.
const (
	// LabelHyperscalerType is the pool: the provider ("aws"), or a regional pool
	// "<provider>_<region>" ("openstack_eu-de-1").
	LabelHyperscalerType = "hyperscalerType"
	// LabelTenantName is the global account a dedicated credential is claimed for.
	LabelTenantName = "tenantName"
	// LabelShared "true": the credential serves many global accounts.
	LabelShared = "shared"
	// LabelDirty "true": released, waiting for the hyperscaler account to be cleaned.
	LabelDirty = "dirty"
	// LabelInternal "true": reserved for the internal global account it is labelled for;
	// never claimed as a free credential, never marked dirty.
	LabelInternal = "internal"
	// LabelEUAccess "true": the credential belongs to the EU-access pool.
	LabelEUAccess = "euAccess"
)

// AnnotationClaimedBy on a dedicated pool credential records the tenant it is claimed
// for: "<namespace>/<name>" of the SubscriptionRequest that claimed it. The tenant is the
// namespace: a credential claimed from one namespace is never handed to a request of
// another, whatever global account that request names (tenantName is only what the
// request says; the namespace is what the management cluster's RBAC vouches for). A
// dedicated credential labelled tenantName without this annotation is handed to no one:
// an operator who assigns one by hand sets both. Without tenantName (a hand-back) the
// credential is free again, whatever this annotation still says.
const AnnotationClaimedBy = "control-plane.kyma-project.io/claimed-by"

// AnnotationGlobalAccounts on a Namespace, set by the operator, lists the global accounts
// whose dedicated credentials SubscriptionRequests of that namespace may claim: account
// ids separated by commas ("ga-1,ga-2"), or "*" for any. Without it a namespace claims
// none (only shared credentials), so one tenant cannot drain the dedicated pool with
// made-up accounts. Requests in the Secret pool's own namespace (the operator's) need no
// grant. Tenants must not be able to write their Namespace object.
const AnnotationGlobalAccounts = "control-plane.kyma-project.io/global-accounts"

// AnnotationPoolHold on the Namespace named by --subscription-pool-namespace of the
// management cluster (kcp-system by default), set by the operator, holds the pool for
// maintenance: while it is there no credential is claimed and none is released (marked
// dirty); requests that need one wait with reason PoolOnHold, deleted ones keep their
// finalizer, and assigned ones keep their credential. Its value is the operator's reason,
// shown in the requests' conditions. Removing it lets everything that waited go on. The
// hold is on a Namespace of the management cluster for either pool (also for the garden's
// CredentialsBindings): tenants cannot write it, and the garden project's Namespace is
// Gardener's.
const AnnotationPoolHold = "control-plane.kyma-project.io/pool-hold"

// SubscriptionRequestSpec asks for a hyperscaler credential.
type SubscriptionRequestSpec struct {
	// provider is the hyperscaler: aws, azure, gcp, openstack.
	// +kubebuilder:validation:Enum=aws;azure;gcp;openstack
	Provider string `json:"provider"`
	// subscriptionSelector is "shared" for the shared pool, or "globalaccount:<id>" (or just
	// "<id>", as in the seed's example) for a credential dedicated to that global account.
	// The account id becomes a label value on the pool's credential, so it is one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=77
	// +kubebuilder:validation:Pattern=`^(shared|(globalaccount:)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$`
	SubscriptionSelector string `json:"subscriptionSelector"`
	// euAccess asks for a credential of the EU-access pool.
	// +optional
	EUAccess bool `json:"euAccess,omitempty"`
	// region is the hyperscaler region the credential is for (the Cluster's
	// spec.core.region). Where the pool has credentials labelled
	// hyperscalerType=<provider>_<region> (a regional pool), only those serve the request.
	// It is compared with labels, never written into one, so any string will do.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Region string `json:"region,omitempty"`
}

// SubscriptionRequestStatus is the assigned credential.
type SubscriptionRequestStatus struct {
	// conditions: Ready (reason Assigned); Reconciling=True with PoolExhausted while no
	// credential is free, or GlobalAccountNotGranted while the namespace may not claim a
	// credential for the global account asked for; Stalled=True when only a change can help (InvalidSelector, a
	// write refused for good). observedGeneration follows only generations that became
	// Ready or Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// gardenerSecretName is the assigned credential: the name of its CredentialsBinding
	// in the garden project, which the Shoot names in spec.credentialsBindingName.
	// +optional
	GardenerSecretName string `json:"gardenerSecretName,omitempty"`
	// observedGeneration is the last generation fully reconciled (Ready) or found stalled;
	// while a newer one is in progress (Reconciling) it lags behind metadata.generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// lastHandledReconcileAt is the value of the annotation
	// reconcile.trustplane.io/requestedAt that the last reconcile handled: equal to the
	// annotation once a reconcile asked for with it (`trustplane reconcile`) has run.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// SubscriptionRequest claims a hyperscaler credential from the pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sr,categories=trustplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.subscriptionSelector`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.gardenerSecretName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SubscriptionRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the request.
	Spec SubscriptionRequestSpec `json:"spec"`
	// status is the assignment.
	// +optional
	Status SubscriptionRequestStatus `json:"status,omitempty"`
}

// SubscriptionRequestList is a list of SubscriptionRequest.
//
// +kubebuilder:object:root=true
type SubscriptionRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the SubscriptionRequests.
	Items []SubscriptionRequest `json:"items"`
}

func init() { register(&SubscriptionRequest{}, &SubscriptionRequestList{}) }
