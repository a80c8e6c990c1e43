package v1alpha1

// The labels and annotations the Cluster and Kubeconfig operators read or write, beside
// those on a KubeconfigRequest and its target objects (kubeconfigrequest_types.go). Each
// says who sets it, on what object, and what it means.

// On a Cluster's Shoot in the garden.
const (
	// ClusterNamespaceLabel and ClusterNameLabel are set by the Cluster operator on the
	// Shoot it makes for a Cluster (and on that Shoot's authentication ConfigMap): the
	// Cluster it serves. A Shoot of the Cluster's name labelled for another Cluster is
	// never taken over, and no kubeconfig is issued for it.
	ClusterNamespaceLabel = "operator.kyma-project.io/cluster-namespace"
	ClusterNameLabel      = "operator.kyma-project.io/cluster-name"
	// ConfirmDeletionAnnotation is Gardener's key, not trustplane's: Gardener refuses to
	// delete a Shoot unless it is "true". The Cluster operator sets it on its Cluster's
	// Shoot just before deleting it.
	ConfirmDeletionAnnotation = "confirmation.gardener.cloud/deletion"
	// DesiredHashAnnotation is set by the Cluster operator on a Shoot: a hash of the Shoot
	// it last applied (labels, annotations and spec). The Shoot is applied again only when
	// that hash changes.
	DesiredHashAnnotation = "cluster.trustplane.io/desired-hash"
	// AuthenticationHashAnnotation is set by the Cluster operator on a Shoot: a hash of the
	// AuthenticationConfiguration in its structured-authentication ConfigMap. A new OIDC
	// setting changes the Shoot (Gardener reconciles its kube-apiserver); an unchanged one
	// lets a reconcile skip writing the ConfigMap.
	AuthenticationHashAnnotation = "cluster.trustplane.io/authentication-config-hash"
)

// infrastructure-manager's (KIM's) keys, which the Cluster operator puts on a Shoot as
// KIM does (its extender/labels.go and extender/annotations.go), and the keys of KIM's
// Runtime it reads them from on a Cluster (api/v1/runtime_types.go).
const (
	// KIMAccountLabel and KIMSubaccountLabel on a Shoot are the global account and
	// subaccount of the Cluster it serves, set by the Cluster operator from the Cluster's
	// labels.
	KIMAccountLabel    = "account"
	KIMSubaccountLabel = "subaccount"
	// KIMRuntimeIDAnnotation on a Shoot is the runtime ID of its Cluster
	// (RuntimeIDLabel), set by the Cluster operator when the Cluster has one.
	KIMRuntimeIDAnnotation = "infrastructuremanager.kyma-project.io/runtime-id"
	// KIMRuntimeGenerationAnnotation on a Shoot is the generation of the Cluster it was
	// applied for, set by the Cluster operator.
	KIMRuntimeGenerationAnnotation = "infrastructuremanager.kyma-project.io/runtime-generation"
	// RuntimeGlobalAccountLabel, RuntimeSubaccountLabel and RuntimeIDLabel are set by the
	// user (or whatever creates Clusters, as KIM's Runtimes) on a Cluster: its global
	// account, subaccount and runtime ID, carried to its Shoot.
	RuntimeGlobalAccountLabel = "kyma-project.io/global-account-id"
	RuntimeSubaccountLabel    = "kyma-project.io/subaccount-id"
	RuntimeIDLabel            = "kyma-project.io/runtime-id"
	// PlatformRegionLabel is set by the user on a Cluster: its platform region, as KIM's
	// Runtime carries it (LabelKymaPlatformRegion); it selects the landscape's settings of
	// that region (EU access among them).
	PlatformRegionLabel = "kyma-project.io/platform-region"
)

// In a Cluster's target cluster.
const (
	// AdministratorLabel is set by the Cluster operator on the cluster-admin
	// ClusterRoleBindings it makes for a Cluster's administrators in the target cluster;
	// its value identifies the Cluster, so that two Clusters brought along for the same
	// cluster keep their own administrators, and removing an administrator removes exactly
	// its binding.
	AdministratorLabel = "operator.kyma-project.io/administrators-of"
	// KubeconfigExpiresAnnotation is set by the Kubeconfig operator on a token binding (a
	// Secret in KubeconfigTargetNamespace): when the token bound to it expires (RFC 3339).
	// Bindings past it are pruned at the next rotation.
	KubeconfigExpiresAnnotation = "kubeconfig.trustplane.io/expires"
	// PodSecurityEnforceLabel is Kubernetes' key, not trustplane's: set by the target
	// cluster's administrators on a namespace, the Pod Security level its API server
	// enforces there. The Kubeconfig operator reads it before granting a Role that writes
	// workloads in that namespace.
	PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"
)

// What the Cluster operator publishes for admission (config/policy/cluster-versions.yaml).
const (
	// LandscapeConfigMap is the ConfigMap the Cluster operator applies in its own namespace
	// when it starts with a garden: what its landscape allows that admission checks
	// Clusters against.
	LandscapeConfigMap = "trustplane-landscape"
	// LandscapeNewestKubernetesVersionKey in LandscapeConfigMap is the newest Kubernetes
	// minor version the garden provisions (landscape.kubernetes.newestVersion), e.g. 1.36.
	LandscapeNewestKubernetesVersionKey = "newestKubernetesVersion"
)

// On a Cluster, set by an operator: infrastructure-manager's keys for the same
// (pkg/reconciler/annotations_utils.go); only the value "true" counts.
const (
	// ForcePatchAnnotation makes the Cluster operator write the Shoot once more although
	// it already carries what the Cluster asks (say, after someone edited the Shoot by
	// hand); the operator removes the annotation once it has.
	ForcePatchAnnotation = "operator.kyma-project.io/force-patch-reconciliation"
	// SuspendPatchAnnotation stops the Cluster operator from changing an existing Shoot
	// (creating one, and deleting it, go on); the Cluster is Reconciling with reason
	// ShootPatchSuspended while its Shoot differs from what it asks.
	SuspendPatchAnnotation = "operator.kyma-project.io/suspend-patch-reconciliation"
)
