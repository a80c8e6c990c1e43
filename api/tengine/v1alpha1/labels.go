package v1alpha1

// Labels and annotations of secret global consistency. The checksum objects' keys are
// written by the secret-checksum controller and read by data planes; the Secret's and
// Ingress's keys are set by users (or their tooling) and read by both.
const (
	// VersionAnnotation is where Tengine-Ingress reads a Secret's (or Ingress's) version
	// (--version-annotation, its default): set by the user on the objects a checksum
	// counts; an object without it is not counted.
	VersionAnnotation = "nginx.ingress.kubernetes.io/version"
	// IngressClassAnnotation is the legacy ingress class annotation a Tengine-Ingress
	// serves Ingresses by (Kubernetes' key; tengine-ingress
	// internal/ingress/controller/ingressclass/ingressclass.go IngressKey): set by users
	// on Ingresses.
	IngressClassAnnotation = "kubernetes.io/ingress.class"
	// ScopeAnnotation holds, on each SecretCheckSum/IngressCheckSum the controller
	// publishes, the scope it covers (namespaces and version annotation), so a data plane
	// can tell "we disagree" from "we look at different things".
	ScopeAnnotation = "checksum.trustplane.io/scope"
	// IDsOmittedAnnotation is set by the controller on a published checksum whose IDs did
	// not fit in one object and were left out of spec.ids: the checksum still holds, only
	// the diff is unavailable. Its value says how many IDs there were and the limit.
	IDsOmittedAnnotation = "checksum.trustplane.io/ids-omitted"
	// ScopeKindLabel says, on a published checksum, which kind of scope it belongs to
	// ("cluster" or "namespace"), so that the two never take each other's objects for
	// leftovers. Objects published before it existed were per namespace.
	ScopeKindLabel = "checksum.trustplane.io/scope-kind"
	// RemoveUnversionedAnnotation "true", set by a user on a Secret that lost its version
	// annotation, confirms that a data plane may remove its last verified files: until
	// then (or until the Secret is deleted) data planes keep serving them, as losing the
	// annotation is usually a careless edit, not a decision.
	RemoveUnversionedAnnotation = "dataplane.trustplane.io/remove-unversioned"
)
