// Package certificates holds the reasons of PodCertificateRequest conditions and of events
// about pod certificates and TLS Secret expiry that trustplane records — kubelet's own
// names where kubelet has them. Where Kubernetes' API defines the value (the condition
// types Issued, Denied and Failed, the reason UnsupportedKeyType: k8s.io/api
// certificates/v1), trustplane uses that constant instead.
package certificates

// Warning events on a pod about its certificate, as kubelet's PodCertificate manager
// emits them (internal/podcert), and on a kubernetes.io/tls Secret about its certificate
// (the tls-expiry controller), each once per certificate.
const (
	// ReasonOverdueForRefresh: the certificate is past its refresh point by more than ten
	// minutes and no new one is in place.
	ReasonOverdueForRefresh = "CertificateOverdueForRefresh"
	// ReasonExpired: the certificate is past its notAfter.
	ReasonExpired = "CertificateExpired"
)

// ReasonUnknownSigner is the Warning event on a pod whose request has waited for a
// signer that has concluded no request of this node agent: the manager cannot know every
// signer, and a request that no signer serves just stays pending, so this says once which
// signer it waits for, and the likely typo (trustplane's addition; kubelet says nothing).
const ReasonUnknownSigner = "UnknownSigner"

// Warning events of the node agent on a pod for which nothing is requested or written,
// each sent once per projection and problem (or path).
const (
	// ReasonInvalidProjection: the projection asks for what the agent cannot request (a key
	// type it cannot generate, a malformed signer name) or the pod names no ServiceAccount;
	// not retried: only a change of the pod helps.
	ReasonInvalidProjection = "InvalidProjection"
	// ReasonServiceAccountNotFound: the pod's ServiceAccount does not exist; checked again
	// on every refresh pass.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	// ReasonBundlePathRefused: the pod's bundle path below the agent's directory holds
	// something the agent did not make (a symbolic link, say): it writes nothing there.
	ReasonBundlePathRefused = "BundlePathRefused"
	// ReasonBundleWriteFailed: the agent could not write the pod's credential bundle (its
	// directory's filesystem full, a failing device); the last written bundle stays in
	// place and the write is retried. Sent once until a write of the projection succeeds.
	ReasonBundleWriteFailed = "BundleWriteFailed"
	// ReasonNoSPIFFEID: the node agent writes the SPIFFE Filesystem Delivery layout
	// (--layout=spiffe) but the pod's certificate carries no valid SPIFFE ID (exactly one
	// spiffe:// URI SAN), so the agent cannot tell which trust domain's bundles the pod
	// loads: its credentials are written, no trust bundle file is. Sent once per
	// projection until a certificate with a SPIFFE ID is written.
	ReasonNoSPIFFEID = "NoSPIFFEID"
)

// Reasons of the Denied condition (and Warning event) the pod certificate signer sets on
// a PodCertificateRequest, beside Kubernetes' UnsupportedKeyType.
const (
	// ReasonPodNotFound: the pod the request names does not exist.
	ReasonPodNotFound = "PodNotFound"
	// ReasonPodMismatch: the pod exists but is not the one that asked: another UID, bound
	// to another node than spec.nodeName, or running as another ServiceAccount.
	ReasonPodMismatch = "PodMismatch"
	// ReasonNodeNotFound: the node the request names does not exist.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonNodeMismatch: the node's UID differs from spec.nodeUID: the node was replaced,
	// and a deleted node's credentials must not be renewed.
	ReasonNodeMismatch = "NodeMismatch"
	// ReasonInvalidProofOfPossession: the request's key and proof of possession do not
	// parse, do not verify, or are not exactly one of the two forms the API allows.
	ReasonInvalidProofOfPossession = "InvalidProofOfPossession"
	// ReasonLifetimeTooShort: the request allows less than the API's 1h minimum lifetime.
	ReasonLifetimeTooShort = "LifetimeTooShort"
)

// ReasonWaitingForCA is the Warning event of the pod certificate signer on a
// PodCertificateRequest it cannot sign yet for want of a usable CA (the CA Secret
// unreadable, refused, mid-rotation, or its CA not valid now): the request stays pending
// and is retried, never denied; sent once per request and wait. The API allows no
// condition for this (only Issued, Denied and Failed).
const ReasonWaitingForCA = "WaitingForCA"

// Warning events of the pod certificate signer on its CA Secret.
const (
	// ReasonInvalidCA: the CA Secret does not parse or fails a check (a CA certificate with
	// keyCertSign, its key, a chain that links, valid now); the last good CA signs on.
	ReasonInvalidCA = "InvalidCA"
	// ReasonInvalidNextCA: the next CA in the Secret (next.crt, next.key) does not parse
	// and is ignored.
	ReasonInvalidNextCA = "InvalidNextCA"
)

// ReasonTooLarge is the Warning event of the tls-expiry controller on a kubernetes.io/tls
// Secret whose tls.crt is above --tls-expiry-secret-max-certificate-bytes: its expiry is not watched.
const ReasonTooLarge = "CertificateTooLarge"

// How `trustplane get` and `describe` report what has no conditions of trustplane's own.
const (
	// ReasonBundlePublished (Ready=True, a signer's ClusterTrustBundle): the bundle's
	// first CA, the one signing, is valid now.
	ReasonBundlePublished = "BundlePublished"
	// ReasonPending (Ready=False, a PodCertificateRequest): the signer has not concluded it.
	ReasonPending = "Pending"
)
