package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
)

// Reasons of a JWKSConfig's conditions, beside the shared ones of package
// api/conditions. A certificate that cannot be published stalls the JWKSConfig with the
// reason of internal/jwks's InputError: MissingCertificate, InvalidPEM, NotACertificate,
// InvalidCertificate, UnsupportedKeyType, WeakKey, CertificateExpired, InvalidAlgorithm
// InvalidPublishedSet or SetTooLarge.
const (
	// ReasonPublished (Ready=True): the set holds the current key.
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
