package nodeagent

// Permissions of `trustplane node-agent` (ClusterRole trustplane-node-agent, generated into
// config/node-agent by `make manifests`): the pods of its node and their
// PodCertificateRequests, the node and service account UIDs a request carries, events, and
// the ClusterTrustBundles it writes as trust bundle files with --layout=spiffe, and the
// namespace labels that make a pod a canary of a preview bundle.
// The manager's markers are generated separately, so neither widens the other.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=podcertificaterequests,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=clustertrustbundles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
