package v1alpha1

// Labels and annotations of the JWKS operator: who sets each, on what object, and what it
// means. A user reads them, and may set OwnerLabel to hand an object over to a JWKSConfig
// (only who may update jwksconfigs/ownerlabels can: config/policy/owner-labels.yaml); the
// others are the controller's own bookkeeping and are not for users to set.
const (
	// OwnerLabel is set by the controller on every object it makes for a JWKSConfig (the
	// JWKS ConfigMap, the nginx ConfigMap, Deployment, Service and pods, the signing
	// Secret); its value is the JWKSConfig's name, in the object's namespace. The
	// controller's private cache holds only objects with this label, and it adopts,
	// overwrites or deletes an object only while the label names its JWKSConfig. A user
	// (with the ownerlabels permission) sets it to hand an existing object over
	// (NameInUse).
	OwnerLabel = "jwks.trustplane.io/jwksconfig"
	// IssuerClaimLabel is set by the controller on an issuer claim, a ConfigMap named
	// jwks-issuer-<hash> in the manager's namespace (--jwks-issuer-claim-namespace); its
	// value is the UID of the JWKSConfig holding the issuer. The JWKS server and the
	// controller watch only ConfigMaps with this label there.
	IssuerClaimLabel = "jwks.trustplane.io/issuer-claim"
	// RetirementsAnnotation is set by the controller on the JWKS ConfigMap: when each old
	// key of the set was retired, so that rotation state survives restarts of the manager.
	RetirementsAnnotation = "jwks.trustplane.io/retired-at"
	// ConfigHashAnnotation is set by the controller on the nginx Deployment's pod
	// template: the hash of the nginx configuration, so that a change to it (cacheMaxAge,
	// discovery) rolls the pods; nginx reads its configuration only at start.
	ConfigHashAnnotation = "jwks.trustplane.io/config-hash"
	// PodContentAnnotation is set by the controller on running nginx pods (not on the pod
	// template, so no restart) when the set changes: the hash of the JWKS ConfigMap's
	// data. Updating the pod makes the kubelet resync its ConfigMap volumes at once,
	// instead of on its periodic sync a minute or more later.
	PodContentAnnotation = "jwks.trustplane.io/jwks-hash"
	// ServerLabel is set by each JWKS server (a manager replica's, or `trustplane
	// jwks-server`) on the Lease it holds in the manager's namespace
	// (--jwks-issuer-claim-namespace) while it answers: its value is the server's name
	// there. The controller watches only Leases with this label there.
	ServerLabel = "jwks.trustplane.io/server"
	// ServingAnnotation is set by each JWKS server on its Lease: for each JWKSConfig whose
	// status names a key waiting to sign (status.pendingKeyID), since when this server has
	// answered a set holding it, as JSON ({"<namespace>/<name>": {"kid": ..., "since":
	// ...}}). The controller copies a key to spec.signingSecret only once every server
	// that holds a Lease says so (docs/jwks.md, "Rotating without refused tokens").
	ServingAnnotation = "jwks.trustplane.io/serving"
)
