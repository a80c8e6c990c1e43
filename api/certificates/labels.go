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
// narrow the allowed names, never widen them; any other key is denied, as the API asks
// of signers.
const DNSNamesAnnotation = "podcert.trustplane.io/dns-names"
