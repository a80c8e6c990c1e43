package certificates

// Annotations a user sets on a pod to opt it in to a pod certificate the node agent
// requests and writes without a podCertificate projected volume source (docs/podcert.md).
const (
	// SignerAnnotation names the signerName of the pod's certificate.
	SignerAnnotation = "podcert.trustplane.io/signer-name"
	// KeyTypeAnnotation names the key type the agent generates (RSA3072, ECDSAP256, ED25519, …).
	KeyTypeAnnotation = "podcert.trustplane.io/key-type"
	// ServeAnnotation "agent" (ServeAgent) asks the node agent, not kubelet, to serve the
	// pod's podCertificate projected volumes.
	ServeAnnotation = "podcert.trustplane.io/serve"
	// ServeAgent is ServeAnnotation's value.
	ServeAgent = "agent"
)

// Annotations of the CA Secret of a podcertificate-signer: the signer writes them as it
// rotates CAs; an operator reads them to see which CA signs and when the next one will.
const (
	// AnnotationSigningSince is when the current CA began to sign (RFC 3339).
	AnnotationSigningSince = "podcert.trustplane.io/signing-since"
	// AnnotationNextSignsAt is when the next CA (next.crt/next.key) begins to sign
	// (RFC 3339): after it has been in the trust bundle for the overlap.
	AnnotationNextSignsAt = "podcert.trustplane.io/next-signs-at"
	// AnnotationReservedUntil is a JSON object from CA fingerprint (SHA-256 of the DER,
	// hex) to an RFC 3339 time no earlier than the notAfter of any leaf that CA signed:
	// until then a retired CA stays in the trust bundle.
	AnnotationReservedUntil = "podcert.trustplane.io/reserved-until"
)

// Labels of the SPIFFE Filesystem Delivery draft (spiffe/spiffe#376, Appendix B) that the
// podcertificate-signer puts on its ClusterTrustBundles, so that a pod's
// clusterTrustBundle projection (or the node agent) selects the bundle of its own trust
// domain, and of the rotation's stage.
const (
	// LabelCanarying is "live" (LabelCanaryingLive) on a bundle every workload loads, and
	// "preview" (LabelCanaryingPreview) on one that only the canary part of a fleet loads.
	LabelCanarying = "k8s.spiffe.io/canarying"
	// LabelCanaryingLive is LabelCanarying's value on the bundle every workload loads.
	LabelCanaryingLive = "live"
	// LabelCanaryingPreview is LabelCanarying's value on the bundle the canaries load.
	LabelCanaryingPreview = "preview"
	// LabelWorkloadTrustDomain is the trust domain of the workloads that load the bundle.
	LabelWorkloadTrustDomain = "k8s.spiffe.io/workload-trust-domain"
	// LabelPeerTrustDomain is the trust domain whose peers the bundle verifies.
	LabelPeerTrustDomain = "k8s.spiffe.io/peer-trust-domain"
)

// DNSNamesAnnotation is the one key of a PodCertificateRequest's
// spec.unverifiedUserAnnotations (a podCertificate projection's userAnnotations) that the
// podcertificate-signer reads: a comma-separated list of DNS names the pod asks for, each
// of which a PodIdentityPolicy of its namespace must allow its ServiceAccount. Without it
// the pod gets every allowed name; with it, only those (an empty value: none). It can
// narrow the allowed names, never widen them. Any other key of UserAnnotationPrefix is
// denied, as the API asks of signers; keys of other domains are ignored (they never reach
// a certificate).
const DNSNamesAnnotation = UserAnnotationPrefix + "dns-names"

// UserAnnotationPrefix is the domain of the unverifiedUserAnnotations keys the
// podcertificate-signer reads.
const UserAnnotationPrefix = "podcert.trustplane.io/"

// Annotations of the CA Secret that carry a canaried CA rotation (docs/podcert.md, "Canaried
// CA rotation"): the signer writes the stage and its times; the operator writes
// AnnotationCARotationHold and AnnotationCARollback, and removes AnnotationCanaryFailed to
// observe again.
const (
	// AnnotationNextStage is "preview" while the next CA is only in the preview bundle, under
	// observation, and "live" once it is in the live bundle, waiting to sign.
	AnnotationNextStage = "podcert.trustplane.io/next-stage"
	// AnnotationNextPreviewSince is when the next CA entered the preview bundle (RFC 3339).
	AnnotationNextPreviewSince = "podcert.trustplane.io/next-preview-since"
	// AnnotationCanaryObservedSince is when the observation of the canaries began: the first
	// moment in preview with any namespace or node selected (RFC 3339).
	AnnotationCanaryObservedSince = "podcert.trustplane.io/canary-observed-since"
	// AnnotationNextLiveSince is when the next CA entered the live bundle (RFC 3339).
	AnnotationNextLiveSince = "podcert.trustplane.io/next-live-since"
	// AnnotationCanaryFailed says why the canary failed; the rotation holds while it is set.
	// The operator removes it to observe again, or rolls back.
	AnnotationCanaryFailed = "podcert.trustplane.io/canary-failed"
	// AnnotationCARotationStatus is the rotation's condition, "<Reason>: <message>" (reasons
	// below): the one line an operator reads to see where the rotation stands.
	AnnotationCARotationStatus = "podcert.trustplane.io/ca-rotation-status"
	// AnnotationCARotationHold "true", written by the operator, holds the rotation at its
	// step: nothing is generated, promoted or retired until it is removed.
	AnnotationCARotationHold = "podcert.trustplane.io/ca-rotation-hold"
	// AnnotationCARollback, written by the operator with any new value (a timestamp, say),
	// drops the next CA before it signs: it leaves the preview and live bundles, and its key
	// the Secret. The signer records the value it acted on in AnnotationCARollbackHandled.
	AnnotationCARollback = "podcert.trustplane.io/ca-rollback"
	// AnnotationCARollbackHandled is the last AnnotationCARollback value the signer acted on.
	AnnotationCARollbackHandled = "podcert.trustplane.io/ca-rollback-handled"
	// AnnotationCanaryNamespaceSelector and AnnotationCanaryNodeSelector, on the preview
	// bundle, are the label selectors of the canary namespaces and nodes: whoever delivers
	// bundles (the node agent's SPIFFE layout) hands the preview bundle to the pods they
	// select.
	AnnotationCanaryNamespaceSelector = "podcert.trustplane.io/canary-namespace-selector"
	AnnotationCanaryNodeSelector      = "podcert.trustplane.io/canary-node-selector"
	// LabelCanary is the default label that makes a namespace or node a canary of CA
	// rotations (--podcertificate-signer-canary-namespace-selector and -node-selector).
	LabelCanary = "podcert.trustplane.io/ca-canary"
)

// Reasons of AnnotationCARotationStatus and of the Events on the CA Secret as a canaried
// rotation moves.
const (
	// ReasonCAPreview: the next CA is in the preview bundle; the canaries are observed.
	ReasonCAPreview = "CAPreview"
	// ReasonCanaryTargetsNothing: the canary selectors match no namespace and no node; the
	// rotation holds until they do.
	ReasonCanaryTargetsNothing = "CanaryTargetsNothing"
	// ReasonCanaryFailed: during the observation a canary pod's certificate was overdue for
	// refresh, the signer refused a canary's request, or a leaf did not verify against the
	// preview bundle. The rotation holds.
	ReasonCanaryFailed = "CanaryFailed"
	// ReasonCALive: the next CA is in the live bundle, and signs after the overlap.
	ReasonCALive = "CALive"
	// ReasonCASigning: the next CA signs; the one before stays in the bundles until its last
	// leaf has expired.
	ReasonCASigning = "CASigning"
	// ReasonCARetired: a CA left the bundles, its last leaf expired.
	ReasonCARetired = "CARetired"
	// ReasonCARotationHeld: the operator holds the rotation (AnnotationCARotationHold).
	ReasonCARotationHeld = "CARotationHeld"
	// ReasonCARolledBack: the operator dropped the next CA (AnnotationCARollback).
	ReasonCARolledBack = "CARolledBack"
)
