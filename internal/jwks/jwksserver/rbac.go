package jwksserver

// Permissions of `trustplane jwks-server` (ClusterRole and Role trustplane-jwks-server,
// generated into config/jwks-server by `make manifests`): it reads the JWKSConfigs, the
// JWKS ConfigMaps the manager publishes (in every namespace, selected by their owner
// label) and the issuer claims (ConfigMaps in the manager's namespace), and writes only
// its own Lease in the manager's namespace, where it reports what it serves
// (internal/jwks/jwkshttp, report.go). The Role's namespace is the install's: kustomize's
// config/jwks-server and the chart's release namespace.
//
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete,namespace=trustplane-system
