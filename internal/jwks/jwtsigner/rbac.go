package jwtsigner

// Permissions of `trustplane jwt-signer` in the namespace of its JWKSConfig (Role
// trustplane-jwt-signer): it reads the JWKSConfig, the ConfigMap of its published set and
// the Secret of its signing key through a cache of that namespace, and writes nothing in
// the cluster. The namespace in the markers is a placeholder, to be dropped when the Role
// is generated (as for the data-plane agent's), so that the Role lands in the
// JWKSConfig's namespace. A signer reads only one JWKSConfig, but a Role cannot name the
// objects a list or watch returns, so it may read every Secret of that namespace: keep
// the JWKSConfig in a namespace of its own (such as the control plane's).
//
// +kubebuilder:rbac:groups=jwks.trustplane.io,namespace=jwt-signer,resources=jwksconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=jwt-signer,resources=configmaps;secrets,verbs=get;list;watch
