package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trustplane/trustplane/api/duration"
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
	// additionalWorkers are worker pools besides the main one (cpu-worker-0, sized by
	// machineType and autoScalerMin/Max above), each an extra worker pool of the Shoot as
	// infrastructure-manager renders a Runtime's additionalWorkers.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalWorkers []WorkerPool `json:"additionalWorkers,omitempty"`
}

// WorkerPool is a worker pool besides the Cluster's main one.
//
// +kubebuilder:validation:XValidation:rule="self.autoScalerMin <= self.autoScalerMax",message="autoScalerMin must not exceed autoScalerMax"
// +kubebuilder:validation:XValidation:rule="!has(self.zones) || self.autoScalerMax >= size(self.zones)",message="autoScalerMax must be at least the number of zones: Gardener needs a node per zone"
type WorkerPool struct {
	// name of the pool: a DNS label of at most 15 characters (Gardener's limit for
	// worker pool names), unique in the Cluster, and not cpu-worker-0 (the main pool).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'cpu-worker-0'",message="cpu-worker-0 is the main worker pool (spec.infrastructure.machineType, autoScalerMin and autoScalerMax)"
	Name string `json:"name"`
	// machineType of the pool's nodes: one of the provider's CloudProfile, e.g. m6i.large.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	MachineType string `json:"machineType"`
	// autoScalerMin is the pool's minimum size.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	AutoScalerMin int32 `json:"autoScalerMin"`
	// autoScalerMax is the pool's maximum size: at least one node per zone.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	AutoScalerMax int32 `json:"autoScalerMax"`
	// zones the pool spreads over, each a zone of the Cluster's region named as the
	// provider names it (aws eu-central-1a, gcp europe-west3-a, azure 1, openstack
	// eu-de-1a) and one of the first three trustplane provisions in. Empty: the main
	// pool's zones. Gardener lets zones be added to a pool, never removed.
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Zones []string `json:"zones,omitempty"`
	// volume is the root volume of the pool's nodes; unset: the main pool's (the
	// operator's --shoot-volume-types and --shoot-volume-size).
	// +optional
	Volume *WorkerVolume `json:"volume,omitempty"`
	// labels on the pool's nodes: keys and values as Kubernetes labels have them.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 316 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="label keys are [prefix/]name as Kubernetes labels have them, e.g. example.com/role or role"
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`
	// taints of the pool's nodes.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Taints []WorkerTaint `json:"taints,omitempty"`
}

// LabelValue is a Kubernetes label value: at most 63 characters, alphanumeric at both
// ends, '-', '_' and '.' between.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// WorkerVolume is the root volume of a pool's nodes.
type WorkerVolume struct {
	// type of the volume, as the provider names it (aws gp3, azure StandardSSD_LRS, gcp
	// pd-balanced); empty: the operator's type for the provider (--shoot-volume-types).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	Type string `json:"type,omitempty"`
	// size of the volume in GiB, as Gardener writes it: "<n>Gi", e.g. 80Gi.
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]{0,4}Gi$`
	Size string `json:"size"`
}

// WorkerTaint is a taint of a pool's nodes.
type WorkerTaint struct {
	// key of the taint: [prefix/]name, as a label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`
	// value of the taint, as a label value; may be empty.
	// +optional
	Value LabelValue `json:"value,omitempty"`
	// effect of the taint.
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect string `json:"effect"`
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
	// dualStack gives the Shoot IPv6 beside IPv4 (ipFamilies [IPv4, IPv6]), on aws and
	// gcp only, as infrastructure-manager does; the CIDRs above stay IPv4 (the provider
	// assigns the IPv6 ranges).
	// +optional
	DualStack bool `json:"dualStack,omitempty"`
}

// ClusterSpec is the desired cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.infrastructure) || !has(self.infrastructure.networking) || !has(self.infrastructure.networking.dualStack) || !self.infrastructure.networking.dualStack || (has(self.infrastructure.provider) && self.infrastructure.provider in ['aws', 'gcp'])",message="spec.infrastructure.networking.dualStack needs spec.infrastructure.provider aws or gcp: IPv4 and IPv6 are provisioned there only"
// +kubebuilder:validation:XValidation:rule="!has(self.kubeAPIServer) || !has(self.kubeAPIServer.acl) || (has(self.infrastructure) && has(self.infrastructure.provider) && self.infrastructure.provider in ['aws', 'azure'])",message="spec.kubeAPIServer.acl needs spec.infrastructure.provider aws or azure: the API server's ACL is provisioned there only, as infrastructure-manager provisions it"
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
	// kubernetesVersion of the cluster: a minor version (1.35, Gardener picks the patch)
	// or a patch version (1.35.2), from 1.32 (the oldest Gardener provisions) to the
	// garden's newest (the landscape's kubernetes.newestVersion, 1.36 unless configured).
	// Unset: the operator's --shoot-kubernetes-version, or Gardener's default. Gardener
	// updates the patch version in the maintenance window and never goes back.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^1\.[0-9]{1,3}(\.[0-9]{1,4})?$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^1[.][0-9]{1,3}([.][0-9]{1,4})?$') || int(self.split('.')[1]) >= 32",message="Gardener provisions Kubernetes 1.32 and newer"
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// kubeAPIServer configures the cluster's API server.
	// +optional
	KubeAPIServer *KubeAPIServer `json:"kubeAPIServer,omitempty"`
	// registryCache are pull-through caches of container registries inside the cluster
	// (Gardener's registry-cache extension), one per upstream registry.
	// +listType=map
	// +listMapKey=upstream
	// +kubebuilder:validation:MaxItems=16
	// +optional
	RegistryCache []RegistryCache `json:"registryCache,omitempty"`
}

// KubeAPIServer configures a cluster's API server.
type KubeAPIServer struct {
	// acl lets only the listed source addresses reach the API server (Gardener's acl
	// extension), on aws and azure.
	// +optional
	ACL *APIServerACL `json:"acl,omitempty"`
	// serviceAccountConfig configures the service-account tokens the API server issues.
	// +optional
	ServiceAccountConfig *ServiceAccountConfig `json:"serviceAccountConfig,omitempty"`
}

// APIServerACL is the allow-list of the API server.
type APIServerACL struct {
	// allowedCIDRs are the source addresses allowed, as CIDRs (IPv4 or IPv6, e.g.
	// 203.0.113.0/24); the landscape adds its own operators' (landscape.acl). At most 50
	// in all, the acl extension's limit.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	AllowedCIDRs []CIDR `json:"allowedCIDRs"`
}

// CIDR is an IP prefix, e.g. 10.0.0.0/8 or 2001:db8::/32, as Go's netip.ParsePrefix
// reads it.
//
// +kubebuilder:validation:MaxLength=49
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32"
type CIDR string

// ServiceAccountConfig configures the service-account tokens of a cluster's API server.
type ServiceAccountConfig struct {
	// maxTokenExpiration is the longest a service-account token may live
	// (kube-apiserver's --service-account-max-token-expiration), e.g. 720h. It is clamped
	// to the landscape's bounds (landscape.serviceAccountTokens, by default Gardener's 720h
	// to 2160h); unset: the landscape's default.
	// +optional
	MaxTokenExpiration *Duration `json:"maxTokenExpiration,omitempty"`
}

// RegistryCache is a pull-through cache of one upstream registry.
//
// +kubebuilder:validation:XValidation:rule="self.volumeSize == oldSelf.volumeSize",message="volumeSize cannot change once the cache exists (the registry-cache extension refuses it): remove the cache and add it again"
// +kubebuilder:validation:XValidation:rule="!(oldSelf.garbageCollection.ttl.matches('^(0+(h|m|s|ms))+$') && !self.garbageCollection.ttl.matches('^(0+(h|m|s|ms))+$'))",message="garbage collection cannot be turned back on once its ttl was 0 (the registry-cache extension refuses it)"
type RegistryCache struct {
	// upstream is the registry cached, as <host>[:<port>] without scheme or path, e.g.
	// docker.io, quay.io or registry.example.com:5000.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=259
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$`
	Upstream string `json:"upstream"`
	// volumeSize of the cache's volume, e.g. 10Gi (Mi, Gi or Ti); it cannot change once
	// the cache exists.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:MaxLength=9
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]{0,5}(Mi|Gi|Ti)$`
	// +optional
	VolumeSize string `json:"volumeSize,omitempty"`
	// garbageCollection removes images not pulled for its ttl.
	// +kubebuilder:default={ttl: "168h"}
	// +optional
	GarbageCollection RegistryCacheGarbageCollection `json:"garbageCollection,omitempty"`
}

// RegistryCacheGarbageCollection is when a registry cache forgets an image.
type RegistryCacheGarbageCollection struct {
	// ttl is how long an image stays cached without being pulled, e.g. 168h; 0s turns
	// garbage collection off, for good (the registry-cache extension refuses to turn it
	// back on).
	// +kubebuilder:default="168h"
	// +optional
	TTL Duration `json:"ttl,omitempty"`
}

// Duration is a length of time written as Go writes it, e.g. "720h" or "1h30m": a string
// on purpose (package api/duration says why).
//
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}(h|m|s|ms)){1,4}$')",message="must be a duration such as 720h, 90m or 1h30m: whole numbers with the units h, m, s or ms (no days, spaces or signs)"
type Duration string

// Parse returns the duration, or an error for a value admission would refuse.
func (d Duration) Parse() (time.Duration, error) { return duration.Parse(string(d)) }

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
	// shootLastOperation is the Shoot's status.lastOperation as Gardener last reported it.
	// +optional
	ShootLastOperation *ShootLastOperation `json:"shootLastOperation,omitempty"`
	// shootLastErrors are the Shoot's status.lastErrors as Gardener last reported them:
	// what failed, with Gardener's error codes.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ShootLastErrors []ShootLastError `json:"shootLastErrors,omitempty"`
	// lastHandledReconcileAt is the value of the annotation
	// reconcile.trustplane.io/requestedAt that the last reconcile handled: equal to the
	// annotation once a reconcile asked for with it (`trustplane reconcile`) has run.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// ShootLastOperation is a Shoot's last operation (Gardener's LastOperation).
type ShootLastOperation struct {
	// type of the operation: Create, Reconcile, Delete, Migrate, Restore or LiveMigrate.
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type"`
	// state of the operation: Processing, Succeeded, Error (Gardener retries), Failed
	// (Gardener does not), Pending or Aborted.
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state"`
	// progress of the operation in percent.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int32 `json:"progress,omitempty"`
	// description of the operation's state, cut to 1024 characters.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
	// lastUpdateTime is when Gardener last updated the operation.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// ShootLastError is one of a Shoot's last errors (Gardener's LastError).
type ShootLastError struct {
	// description of the error, cut to 1024 characters.
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description"`
	// taskID is the step of Gardener's flow that failed.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	TaskID string `json:"taskID,omitempty"`
	// codes are Gardener's error codes, e.g. ERR_INFRA_UNAUTHORIZED. Gardener does not
	// retry ERR_INFRA_UNAUTHENTICATED, ERR_INFRA_UNAUTHORIZED, ERR_INFRA_DEPENDENCIES,
	// ERR_INFRA_QUOTA_EXCEEDED, ERR_INFRA_RATE_LIMITS_EXCEEDED, ERR_CONFIGURATION_PROBLEM and
	// ERR_PROBLEMATIC_WEBHOOK: a Cluster whose Shoot has one is Stalled.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	Codes []string `json:"codes,omitempty"`
	// lastUpdateTime is when Gardener last reported the error.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
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
