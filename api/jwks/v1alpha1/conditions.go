package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
)

// Reasons of a JWKSConfig's conditions and events, beside the shared ones of package
// api/conditions. A certificate that cannot be published stalls the JWKSConfig with one
// of the input reasons below (the reason of internal/jwks/jwkset's InputError).
const (
	// ReasonPublished (Ready=True): the set holds the current key. Also the event of a
	// set's first publication.
	ReasonPublished = "Published"
	// ReasonSecretNotFound (Reconciling): spec.certificateSecret does not exist yet; its
	// creation brings the JWKSConfig back.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonUpdateThrottled (Reconciling): the set changed, and the update waits for the
	// end of the update interval (--jwks-min-update-interval) since the last one.
	ReasonUpdateThrottled = "UpdateThrottled"
	// ReasonInvalidSpec (Stalled): a field holds a value admission refuses today (stored
	// under an older CRD).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNameInUse (Stalled): an object the JWKSConfig would write (its ConfigMaps,
	// nginx Deployment or Service) exists and was made for another JWKSConfig, or not by
	// trustplane at all; it is left untouched. Choosing another name, or deleting or
	// labelling that object (`jwks.trustplane.io/jwksconfig: <name>`), resolves it.
	ReasonNameInUse = "NameInUse"
	// ReasonServerSyncing (Reconciling): the set is written, and trustplane's own server
	// does not answer it yet (its cache has not seen the write).
	ReasonServerSyncing = "ServerSyncing"
	// ReasonNginxUnavailable (Reconciling): the set is written, and the nginx Deployment
	// does not have all its replicas updated and available yet.
	ReasonNginxUnavailable = "NginxUnavailable"
	// ReasonIssuerInUse (Stalled, or Reconciling while a released issuer is held for its
	// namespace): spec.issuer is served by another JWKSConfig. An issuer (host and path)
	// is served by one JWKSConfig only, the first to claim it, whichever is older; nothing
	// is published for this one until the issuer is free.
	ReasonIssuerInUse = "IssuerInUse"
	// ReasonIssuerNotAllowed (Stalled): the operator binds spec.issuer's host or path to
	// another namespace (--jwks-issuer-namespaces).
	ReasonIssuerNotAllowed = "IssuerNotAllowed"
	// ReasonOverLimit (Stalled): a field asks for more than the operator allows
	// (--jwks-max-cache-max-age, --jwks-nginx-max-replicas, --jwks-nginx-max-resources);
	// the message names the field and the limit. The published set is unchanged.
	ReasonOverLimit = "OverLimit"
	// ReasonKeyPublished (event): a new key is in the set, waiting to be copied to
	// spec.signingSecret (the message says when).
	ReasonKeyPublished = "KeyPublished"
	// ReasonKeyPromoted (event): a key was copied to spec.signingSecret; signers use it now.
	ReasonKeyPromoted = "KeyPromoted"
	// ReasonAlgorithmUnsupported (Warning event): spec.issuer is set and the published
	// algorithm is one kube-apiserver's JWT authenticator cannot verify (EdDSA).
	ReasonAlgorithmUnsupported = "AlgorithmUnsupportedByKubeAPIServer"
	// ReasonKeyRotated (event): the set's current key changed; the message names the new
	// and the previous key.
	ReasonKeyRotated = "KeyRotated"
	// ReasonUpdated (event): the set was rewritten with the same current key.
	ReasonUpdated = "Updated"
	// ReasonKeyRemoved (event): retired keys whose time was up left the set.
	ReasonKeyRemoved = "KeyRemoved"
	// ReasonDriftReverted (Warning event): someone else changed the set's ConfigMap; the
	// published set was put back.
	ReasonDriftReverted = "DriftReverted"
	// ReasonRelyingPartiesHoldKey (RelyingParties=True): every relying party of
	// spec.promotion reports a fetched set that holds the pending key (or the signing key,
	// when none is pending). Also the reason of the KeyPromoted event of a key promoted on
	// their word, before its timer.
	ReasonRelyingPartiesHoldKey = "RelyingPartiesHoldKey"
	// ReasonKeyNotFetched (RelyingParties=False): a relying party reports a set that does
	// not hold the pending key yet, or no fetch of the issuer at all; promotion waits for
	// it, at most until status.pendingPromotionTime.
	ReasonKeyNotFetched = "KeyNotFetched"
	// ReasonRelyingPartyUnreadable (RelyingParties=False, and a Warning event): a relying
	// party's metrics could not be read (unreachable, a TLS error, 401 or 403, not
	// Prometheus metrics, its credentials Secret missing or incomplete, or a host the
	// operator does not allow); the message names it and why. Promotion falls back to the
	// timer.
	ReasonRelyingPartyUnreadable = "RelyingPartyUnreadable"
	// ReasonConfigMapMoved (event): spec.configMapName changed; the set moved to the new
	// ConfigMap and the old one was deleted.
	ReasonConfigMapMoved = "ConfigMapMoved"
)

// ConditionRelyingParties says whether the relying parties of spec.promotion hold the key
// (reasons RelyingPartiesHoldKey, KeyNotFetched, RelyingPartyUnreadable); only with
// spec.promotion. It never makes the JWKSConfig not Ready: promotion then waits for its
// timer.
const ConditionRelyingParties = "RelyingParties"

// Reasons of input that cannot be published (Stalled): retrying without a change to the
// Secret or the spec cannot succeed, and the published set is left unchanged. The Secret
// watch brings the JWKSConfig back when the Secret changes.
const (
	// ReasonMissingCertificate: spec.certificateSecret has no tls.crt, or an empty one.
	ReasonMissingCertificate = "MissingCertificate"
	// ReasonMissingPrivateKey: spec.signingSecret is set and spec.certificateSecret has no
	// tls.key to copy to it.
	ReasonMissingPrivateKey = "MissingPrivateKey"
	// ReasonInvalidPEM: tls.crt holds no PEM block.
	ReasonInvalidPEM = "InvalidPEM"
	// ReasonNotACertificate: a PEM block of tls.crt is not a CERTIFICATE.
	ReasonNotACertificate = "NotACertificate"
	// ReasonInvalidCertificate: a certificate of tls.crt does not parse.
	ReasonInvalidCertificate = "InvalidCertificate"
	// ReasonUnsupportedKey: the certificate's key is of a type or curve a JWK Set cannot
	// carry here (RSA, EC P-256/P-384/P-521 and Ed25519 are supported).
	ReasonUnsupportedKey = "UnsupportedKeyType"
	// ReasonWeakKey: an RSA key shorter than 2048 bits.
	ReasonWeakKey = "WeakKey"
	// ReasonCertificateExpired: the leaf certificate of tls.crt has expired.
	ReasonCertificateExpired = "CertificateExpired"
	// ReasonInvalidAlgorithm: spec.algorithm does not fit the certificate's key.
	ReasonInvalidAlgorithm = "InvalidAlgorithm"
	// ReasonInvalidPublished: the JWK Set already in the ConfigMap does not parse; it is
	// left untouched (it may hold keys that tokens in flight need) until fixed or deleted.
	ReasonInvalidPublished = "InvalidPublishedSet"
	// ReasonSetTooLarge: the current certificate chain (with the one signed with) alone
	// makes a JWK Set larger than a ConfigMap can hold.
	ReasonSetTooLarge = "SetTooLarge"
	// ReasonCertificateTooLarge: tls.crt is larger than a certificate chain may be here
	// (64 KiB), or holds more certificates than a chain may (16).
	ReasonCertificateTooLarge = "CertificateTooLarge"
)

var _ conditions.Object = &JWKSConfig{}

// GetConditions returns status.conditions.
func (c *JWKSConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces status.conditions.
func (c *JWKSConfig) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetObservedGeneration returns status.observedGeneration.
func (c *JWKSConfig) GetObservedGeneration() int64 { return c.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (c *JWKSConfig) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// GetLastHandledReconcileAt returns status.lastHandledReconcileAt.
func (c *JWKSConfig) GetLastHandledReconcileAt() string { return c.Status.LastHandledReconcileAt }

// SetLastHandledReconcileAt sets status.lastHandledReconcileAt.
func (c *JWKSConfig) SetLastHandledReconcileAt(at string) { c.Status.LastHandledReconcileAt = at }

var _ conditions.ReconcileRequestStatus = &JWKSConfig{}
