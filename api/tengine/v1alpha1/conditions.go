package v1alpha1

// Reasons of the events, metrics and statuses trustplane reports about SecretCheckSums
// and IngressCheckSums and the Secrets and Ingresses they count: those of its checksum
// control plane (internal/checksum/secretchecksum) and of its data-plane agent
// (`trustplane dataplane`). They are trustplane's, not Tengine's: Tengine-Ingress neither
// sets nor reads them. They are CamelCase and stable, as dashboards and alerts match them.
const (
	// Why a Secret or an Ingress is left out of the checksum (internal/checksum's
	// LeftOut): the reason label of trustplane_checksum_left_out, and the cause told in
	// the LeftOutOfChecksum event on the object. Objects not meant for the checksum at
	// all (ReasonNotVersioned, ReasonOtherClass) are never reported.

	// ReasonNotVersioned: the object has no version annotation. Such objects are not
	// meant for the checksum (a cert-manager Secret, say) and are never reported.
	ReasonNotVersioned = "NotVersioned"
	// ReasonNoNumericID: the object's name has no integer after its last "-".
	ReasonNoNumericID = "NoNumericID"
	// ReasonNoVersion: the version annotation is empty, 0, or not an integer.
	ReasonNoVersion = "NoVersion"
	// ReasonInvalidTLSCrt: the first PEM block of tls.crt is not a certificate that parses.
	ReasonInvalidTLSCrt = "InvalidCertificate"
	// ReasonNoKeyPair: the Secret has neither a tls.crt and tls.key pair nor a ca.crt.
	ReasonNoKeyPair = "NoKeyPair"
	// ReasonKeyMismatch: tls.crt and tls.key do not load as a pair.
	ReasonKeyMismatch = "KeyMismatch"
	// ReasonInvalidCA: ca.crt holds no certificate, or one that does not parse.
	ReasonInvalidCA = "InvalidCA"
	// ReasonInvalidCRL: ca.crl does not start with an X509 CRL that parses.
	ReasonInvalidCRL = "InvalidCRL"
	// ReasonOtherClass: the Ingress belongs to another controller (another class, or no
	// class while Tengine does not watch those). Not meant for the checksum: never reported.
	ReasonOtherClass = "OtherIngressClass"
	// ReasonIngressClassNotFound: spec.ingressClassName names no IngressClass. Tengine
	// keeps no such Ingress, and nobody serves it: reported.
	ReasonIngressClassNotFound = "IngressClassNotFound"

	// The control plane's events.

	// ReasonPublished (event on a SecretCheckSum or IngressCheckSum): a new checksum was
	// published.
	ReasonPublished = "Published"
	// ReasonLeftOut (Warning event on a versioned Secret or Ingress): the checksum leaves
	// it out; the note says why.
	ReasonLeftOut = "LeftOutOfChecksum"
	// ReasonVersionRemoved (Warning event on a Secret): the Secret was counted and lost its
	// version annotation (commonly `kubectl create secret tls ... --dry-run=client -o yaml |
	// kubectl apply -f -`, which writes no annotations): Tengine-Ingress no longer counts
	// it, and the checksum published next leaves it out. docs/checksum.md shows the
	// rotation recipe that keeps the annotation.
	ReasonVersionRemoved = "VersionRemoved"
	// ReasonIDsOmitted (Warning event on a SecretCheckSum or IngressCheckSum): it was
	// published without its IDs, too many to fit in one object.
	ReasonIDsOmitted = "IDsOmitted"

	// The data-plane agent's events, on the SecretCheckSum or IngressCheckSum it compared
	// the local objects with.

	// ReasonVerified (event): the data plane serves a newly verified set of Secrets.
	ReasonVerified = "Verified"
	// ReasonChecksumMismatch (Warning event): the local objects do not match the checksum;
	// the note names the differing IDs when they are known.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonScopeMismatch (Warning event): checksums are published, none matches, and none
	// covers what the data plane watches (its namespaces or version annotation).
	ReasonScopeMismatch = "ScopeMismatch"
	// ReasonReloadFailed (Warning event): the reload command failed after a newly
	// verified set was written; the previous set was put back.
	ReasonReloadFailed = "ReloadFailed"
	// ReasonUnversionedKept (Warning event on a Secret): the Secret lost its version
	// annotation; the data plane keeps serving its last verified files until an operator
	// confirms the removal (deleting the Secret, or annotating it
	// dataplane.trustplane.io/remove-unversioned: "true") or puts a version back.
	ReasonUnversionedKept = "UnversionedKept"
	// ReasonUncountedKept (Warning event on a Secret): the Secret's new content is no
	// longer counted by the checksum (its certificate and key do not load as a pair, it
	// lost its numeric ID or its type); the data plane keeps serving its last verified
	// files, as for ReasonUnversionedKept, until the removal is confirmed the same way or
	// a loadable version replaces it.
	ReasonUncountedKept = "UncountedKept"
	// ReasonUndecodableChecksum (Warning event): the object does not decode, and the data
	// plane ignores it.
	ReasonUndecodableChecksum = "UndecodableChecksum"
)
