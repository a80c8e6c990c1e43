package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterCore is the cluster's purpose and place.
type ClusterCore struct {
	// purpose of the Gardener shoot: evaluation, development, production, testing.
	// +kubebuilder:validation:Enum=evaluation;development;production;testing
	// +kubebuilder:default=development
	// +optional
	Purpose string `json:"purpose,omitempty"`
	// region of the hyperscaler.
	// +optional
	Region string `json:"region,omitempty"`
}

// OIDCConfig is the API server's OIDC authentication.
type OIDCConfig struct {
	// clientID of the OIDC client.
	ClientID string `json:"clientID"`
	// issuerURL of the OIDC provider.
	IssuerURL string `json:"issuerURL"`
	// groupsClaim names the groups claim.
	// +optional
	GroupsClaim string `json:"groupsClaim,omitempty"`
	// usernameClaim names the username claim.
	// +optional
	UsernameClaim string `json:"usernameClaim,omitempty"`
	// usernamePrefix is prepended to usernames.
	// +optional
	UsernamePrefix string `json:"usernamePrefix,omitempty"`
	// signingAlgs accepted.
	// +listType=atomic
	// +optional
	SigningAlgs []string `json:"signingAlgs,omitempty"`
}

// ClusterInfrastructure is where and how big the cluster is.
//
// +kubebuilder:validation:XValidation:rule="!has(self.autoScalerMin) || !has(self.autoScalerMax) || self.autoScalerMin <= self.autoScalerMax",message="autoScalerMin must not exceed autoScalerMax"
type ClusterInfrastructure struct {
	// provider is the hyperscaler: aws, azure, gcp, openstack.
	// +optional
	Provider string `json:"provider,omitempty"`
	// machineType of the worker pool.
	// +optional
	MachineType string `json:"machineType,omitempty"`
	// autoScalerMin is the worker pool's minimum size.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AutoScalerMin int32 `json:"autoScalerMin,omitempty"`
	// autoScalerMax is the worker pool's maximum size.
	// +kubebuilder:validation:Minimum=1
	// +optional
	AutoScalerMax int32 `json:"autoScalerMax,omitempty"`
	// numberOfZones spreads the worker pool.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	NumberOfZones int32 `json:"numberOfZones,omitempty"`
	// subscriptionSelector picks the hyperscaler credential: "shared" for the shared pool,
	// "globalaccount:<id>" for a credential dedicated to that global account.
	// The account id becomes a label value on the pool's credential, so it is one.
	// +kubebuilder:validation:MaxLength=77
	// +kubebuilder:validation:Pattern=`^(shared|globalaccount:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$`
	// +optional
	SubscriptionSelector string `json:"subscriptionSelector,omitempty"`
	// networking overrides the operator's CIDRs (--shoot-nodes-cidr, --shoot-pods-cidr,
	// --shoot-services-cidr) for this cluster's shoot. The zone subnets are cut from the
	// nodes CIDR (a /16 to /24). Gardener cannot change them once the shoot exists.
	// +optional
	Networking *ClusterNetworking `json:"networking,omitempty"`
}

// ClusterNetworking are the CIDRs of a cluster's shoot; empty fields keep the operator's.
type ClusterNetworking struct {
	// nodes is the CIDR of the nodes (and of the VPC or VNet made for them).
	// +kubebuilder:validation:MaxLength=43
	// +optional
	Nodes string `json:"nodes,omitempty"`
	// pods is the CIDR of the pods; it must not overlap nodes or services.
	// +kubebuilder:validation:MaxLength=43
	// +optional
	Pods string `json:"pods,omitempty"`
	// services is the CIDR of the services; it must not overlap nodes or pods.
	// +kubebuilder:validation:MaxLength=43
	// +optional
	Services string `json:"services,omitempty"`
}

// ClusterSpec is the desired cluster.
type ClusterSpec struct {
	// core is the purpose and region.
	// +optional
	Core ClusterCore `json:"core,omitempty"`
	// extensions are Gardener shoot extensions, passed through.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Extensions *runtime.RawExtension `json:"extensions,omitempty"`
	// oidcConfig configures the API server's OIDC authentication.
	// +optional
	OIDCConfig *OIDCConfig `json:"oidcConfig,omitempty"`
	// infrastructure is the hyperscaler side.
	// +optional
	Infrastructure ClusterInfrastructure `json:"infrastructure,omitempty"`
	// administrators get cluster-admin in the new cluster.
	// +listType=set
	// +optional
	Administrators []string `json:"administrators,omitempty"`
	// kubeconfigSecretRef brings your own cluster (BYOC): a Secret in this namespace
	// whose "kubeconfig" key is a cluster-admin kubeconfig. Gardener is not used.
	// +optional
	KubeconfigSecretRef *SecretKeyReference `json:"kubeconfigSecretRef,omitempty"`
	// kubeconfigRequestNamespaces are the namespaces, besides this Cluster's own, whose
	// KubeconfigRequests may name this Cluster (spec.clusterNamespace), in the spirit of
	// Gateway API's ReferenceGrant: the owner of the Cluster grants, a tenant cannot.
	// Empty: only KubeconfigRequests in this namespace. Removing a namespace withdraws
	// what its requests were granted in the cluster.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	KubeconfigRequestNamespaces []string `json:"kubeconfigRequestNamespaces,omitempty"`
}

// SecretKeyReference names a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key in the Secret's data; default "kubeconfig".
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// ClusterStatus is the observed cluster.
type ClusterStatus struct {
	// conditions: ClusterProvisioned (the cluster exists), Ready (reason
	// AdministratorsBound); Reconciling=True while provisioning, waiting or retrying;
	// Stalled=True when only a change can help (bad spec or kubeconfig, a write refused
	// for good). observedGeneration follows only generations that became Ready or Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the last generation fully reconciled (Ready) or found stalled;
	// while a newer one is in progress (Reconciling) it lags behind metadata.generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// shootName is the Gardener shoot of this cluster: 15 characters (a letter, then 14 of
	// [a-z0-9]) carrying 77 bits of the SHA-256 of "<namespace>/<name>"
	// (internal/provisioning/shoot.Name), e.g. qe1rmevfn4hmaww; a Cluster provisioned by an earlier
	// version keeps its shoot named "c-" and 7 hex digits of that hash, e.g. c-1a2b3c4.
	// Nothing trusts it beyond choosing between those two: the Kubeconfig operator derives
	// the shoot from the Cluster's namespace and name and refuses (ShootMismatch) a status
	// that names another.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z][a-z0-9]{14}|c-[0-9a-f]{7})$')",message="status.shootName is the Cluster's own shoot: a letter and 14 of [a-z0-9] (e.g. qe1rmevfn4hmaww), or, provisioned by an earlier version, c- and 7 lower-case hex digits (e.g. c-1a2b3c4)"
	// +optional
	ShootName string `json:"shootName,omitempty"`
	// lastHandledReconcileAt is the value of the annotation
	// reconcile.trustplane.io/requestedAt that the last reconcile handled: equal to the
	// annotation once a reconcile asked for with it (`trustplane reconcile`) has run.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// Cluster is a Kubernetes cluster to provision through Gardener, or one brought along.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=trustplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=`.status.conditions[?(@.type=="ClusterProvisioned")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired cluster.
	Spec ClusterSpec `json:"spec,omitempty"`
	// status is the observed cluster.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Cluster.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Clusters.
	Items []Cluster `json:"items"`
}

func init() { register(&Cluster{}, &ClusterList{}) }
