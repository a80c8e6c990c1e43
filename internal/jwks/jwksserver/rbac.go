package jwksserver

// Permissions of `trustplane jwks-server` (ClusterRole trustplane-jwks-server, generated
// into config/jwks-server by `make manifests`): it reads, and never writes, the
// JWKSConfigs, the JWKS ConfigMaps the manager publishes (in every namespace, selected by
// their owner label) and the issuer claims (ConfigMaps in the manager's namespace).
//
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
