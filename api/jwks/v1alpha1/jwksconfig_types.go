package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateStrategy says how a new signing key enters the published set.
// +kubebuilder:validation:Enum=rolling;immediate
type UpdateStrategy string

const (
	// UpdateStrategyRolling adds the new key next to the old ones (graceful rotation).
	UpdateStrategyRolling UpdateStrategy = "rolling"
	// UpdateStrategyImmediate replaces the whole set with the new key.
	UpdateStrategyImmediate UpdateStrategy = "immediate"
)

// JWKSConfigSpec is the desired publication of one TLS Secret's key as a JWK Set.
type JWKSConfigSpec struct {
	// certificateSecret is the name of a Secret in the same namespace whose `tls.crt`
	// holds a PEM certificate chain, leaf first (as cert-manager writes it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-tls"
	// +required
	CertificateSecret string `json:"certificateSecret"`

	// signingSecret, when set, is a Secret in the same namespace that trustplane writes
	// (type kubernetes.io/tls: tls.crt, tls.key, and ca.crt when the source has one) with
	// the key signers must use. A new key of certificateSecret is published at once but
	// copied here only once every server has served it for cacheMaxAge plus
	// --jwks-promotion-margin, so no relying party that caches the set refuses a token
	// signed with it; until then the key being signed with stays in the set. The first key,
	// and any key with updateStrategy immediate, is copied at once. It must not be
	// certificateSecret, nor a Secret someone else made (NameInUse). See docs/jwks.md,
	// "Rotating without refused tokens".
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-signing"
	// +optional
	SigningSecret string `json:"signingSecret,omitempty"`

	// configMapName is the ConfigMap that receives the JWK Set under the data key
	// `jwks.json`. Defaults to `<name>-jwks`. It must not be a ConfigMap that another
	// JWKSConfig or anyone else made (the JWKSConfig stalls with reason NameInUse); an
	// existing set is handed over by labelling its ConfigMap
	// `jwks.trustplane.io/jwksconfig: <name>`. Renaming moves the set, retired keys
	// included, and deletes the ConfigMap under the old name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ConfigMap name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-jwks"
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`

	// nginxConfigMapName is the ConfigMap that receives the generated nginx
	// configuration. Defaults to `<name>-nginx`.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ConfigMap name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-nginx"
	// +optional
	NginxConfigMapName string `json:"nginxConfigMapName,omitempty"`

	// endpoint is the path clients are told to fetch the set from. nginx serves the set
	// on every path, so this is informational and kept for compatibility.
	// +kubebuilder:default="/jwks.json"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path such as /jwks.json"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// updateStrategy is how a new key enters the set: `rolling` keeps old keys (when
	// keepOldKeys is true) so tokens signed with them still verify; `immediate` replaces
	// the set at once.
	// +kubebuilder:default=rolling
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// keepOldKeys keeps retired keys in the set until oldKeysTTL has passed since their
	// retirement. Only used with the rolling strategy.
	// +kubebuilder:default=true
	// +optional
	KeepOldKeys *bool `json:"keepOldKeys,omitempty"`

	// oldKeysTTL is how long a retired key stays published after it stopped being the
	// current key.
	// +kubebuilder:default="720h"
	// +optional
	OldKeysTTL *Duration `json:"oldKeysTTL,omitempty"`

	// maxKeys caps the number of keys in the set, the current key included: when a
	// rotation would exceed it, the keys retired longest ago leave first, before their
	// oldKeysTTL. The current key is never removed. Retired keys also leave early when
	// the set would otherwise outgrow the ConfigMap size limit.
	// +kubebuilder:default=3
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 20",message="must be from 1 to 20 (the current key and up to 19 retired ones), such as 3"
	// +optional
	MaxKeys *int32 `json:"maxKeys,omitempty"`

	// cleanupOnDelete also deletes the JWK Set ConfigMap when this JWKSConfig is deleted.
	// By default the ConfigMap is kept, because consumers may read it directly.
	// +kubebuilder:default=false
	// +optional
	CleanupOnDelete bool `json:"cleanupOnDelete,omitempty"`

	// algorithm overrides the JWS algorithm published for the key. By default it follows
	// the key: RS256 for RSA, ES256/ES384/ES512 for EC P-256/P-384/P-521, EdDSA for
	// Ed25519. An override must fit the key type.
	// +kubebuilder:validation:Enum=RS256;RS384;RS512;PS256;PS384;PS512;ES256;ES384;ES512;EdDSA
	// +optional
	Algorithm string `json:"algorithm,omitempty"`

	// cacheMaxAge is the Cache-Control max-age that the servers send with the set, at
	// most the operator's --jwks-max-cache-max-age (default 24h; longer stalls with
	// OverLimit).
	// +kubebuilder:default="5m"
	// +optional
	CacheMaxAge *Duration `json:"cacheMaxAge,omitempty"`

	// issuer, when set, publishes an OpenID discovery document for it, with jwks_uri
	// `<issuer>/jwks.json`: trustplane's own server answers it on
	// `/<namespace>/<name>/.well-known/openid-configuration` and on the issuer's own path
	// (`<issuer path>/.well-known/openid-configuration`), nginx on every path ending in
	// `/.well-known/openid-configuration`, and the JWKS ConfigMap holds it under
	// `openid-configuration`. See docs/jwks.md, "Discovery behind a proxy". An issuer
	// (host and path) is served by one JWKSConfig only: the first to claim it, whichever
	// is older; another stalls with IssuerInUse, and the operator can bind issuers to
	// namespaces (IssuerNotAllowed). Issuers are compared in one spelling: the host name
	// without case, port or trailing dot, and the path without its trailing slash; so a
	// path is written as it reads, without percent-escapes, empty or dot segments. A path
	// /<namespace>/<name> is the canonical route of that namespace's JWKSConfig, which no
	// issuer of another namespace may name (IssuerNotAllowed).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') && isURL(self) && url(self).getHostname() != '' && !self.contains('@') && !self.contains('?') && !self.contains('#')",message="must be an https URL with a host and no user, query or fragment, such as https://idp.example or https://idp.example/tenants/a"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('https://') || (!self.contains('%') && !self.substring(8).contains('//') && !self.matches('/[.][.]?(/|$)') && self.matches('^https://([A-Za-z0-9._-]+|[[][0-9A-Fa-f:.]+[]])(:[0-9]+)?([/][!-~]*)?$'))",message="must be written in its one spelling: no percent-escapes, no empty, '.' or '..' path segments, and an ASCII host name (an internationalised one in its xn-- form), such as https://idp.example/tenants/a"
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// nginx configures the nginx Deployment that serves the set inside the cluster.
	// +optional
	Nginx NginxSpec `json:"nginx,omitempty"`

	// promotion lets relying parties prove they fetched a new key, so that it is copied to
	// spec.signingSecret as soon as all of them hold it, rather than only when the timer
	// (cacheMaxAge plus the promotion margin) runs out. The timer stays the fallback: a
	// relying party that cannot be read holds promotion until then, never beyond. Only
	// with spec.signingSecret. See docs/jwks.md, "Promotion on proof".
	// +optional
	Promotion *PromotionSpec `json:"promotion,omitempty"`
}

// PromotionSpec names the relying parties whose word promotes a key.
type PromotionSpec struct {
	// relyingParties are the instances that must each report a fetched set holding the
	// new key. At first kube-apiserver: one entry per API server instance, as each
	// reports only its own fetches.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +required
	RelyingParties []RelyingParty `json:"relyingParties"`
}

// RelyingParty is one kube-apiserver instance that verifies tokens of this issuer with
// its structured authentication configuration (a jwt issuer) and exports its JWKS fetch
// metrics (feature gate StructuredAuthenticationConfigurationJWKSMetrics, beta and on by
// default since 1.35).
type RelyingParty struct {
	// name names the instance in status and conditions, such as apiserver-0.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label (lower-case letters, digits and '-'), such as apiserver-0"
	// +required
	Name string `json:"name"`

	// metricsURL is the https URL of the instance's /metrics, such as
	// https://10.0.0.10:6443/metrics. Its host must be one the operator allows
	// (--jwks-relying-party-hosts).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') && isURL(self) && url(self).getHostname() != '' && !self.contains('@') && !self.contains('#')",message="must be an https URL with a host and no user or fragment, such as https://10.0.0.10:6443/metrics"
	// +required
	MetricsURL string `json:"metricsURL"`

	// credentialsSecretName is a Secret in the JWKSConfig's namespace with `token`, a
	// bearer token allowed to get /metrics (nonResourceURLs [/metrics], verb get), and
	// `ca.crt`, the CA of the instance's serving certificate (without it, the system's
	// roots). A kubernetes.io/service-account-token Secret has both.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as apiserver-metrics-reader"
	// +required
	CredentialsSecretName string `json:"credentialsSecretName"`

	// issuer is the issuer URL exactly as the instance's authentication configuration
	// names it (its metrics are keyed by its hash). Defaults to spec.issuer.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') && isURL(self)",message="must be an https URL, such as https://idp.example"
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// audience is one audience the instance's jwt authenticator accepts for the issuer.
	// kube-apiserver refetches a set only for a token whose key it does not know, within
	// 30 s of its cached set's expiry; while a key is pending, trustplane presents it, at
	// each scrape, a token of this audience that names the new key and is signed by a
	// throwaway key: refused, it makes the instance refetch as soon as its cache allows.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Audience string `json:"audience"`
}

// NginxSpec configures the nginx Deployment and Service that serve the set. The image is
// not a field: which image runs in a tenant's namespace under trustplane's name is the
// operator's choice (--jwks-nginx-image).
type NginxSpec struct {
	// enabled deploys nginx. Set it to false to publish only the ConfigMap (and
	// trustplane's own endpoint).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// replicas is the number of nginx pods, at most 20 (the operator's
	// --jwks-nginx-max-replicas, default 5, may allow fewer: more stall with OverLimit).
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// resources are the nginx container's compute resource requests and limits.
	// +optional
	Resources NginxResources `json:"resources,omitempty"`
}

// NginxResources are the nginx container's requests and limits, as in a Pod.
type NginxResources struct {
	// limits are the most the container may use, e.g. {memory: 64Mi}: cpu, memory and
	// ephemeral-storage only, each at most the operator's --jwks-nginx-max-resources
	// (default cpu=1, memory=512Mi, ephemeral-storage=1Gi; more stall with OverLimit).
	// +kubebuilder:validation:MaxProperties=3
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="only cpu, memory and ephemeral-storage, such as {cpu: 100m, memory: 64Mi}"
	// +optional
	Limits map[corev1.ResourceName]Quantity `json:"limits,omitempty"`

	// requests are what the scheduler reserves, e.g. {cpu: 10m, memory: 16Mi}: cpu,
	// memory and ephemeral-storage only, each within --jwks-nginx-max-resources.
	// +kubebuilder:validation:MaxProperties=3
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="only cpu, memory and ephemeral-storage, such as {cpu: 10m, memory: 16Mi}"
	// +optional
	Requests map[corev1.ResourceName]Quantity `json:"requests,omitempty"`
}

// PublishedKey describes one key in the published set.
type PublishedKey struct {
	// kid is the key ID: the RFC 7638 SHA-256 thumbprint of the public key.
	KeyID string `json:"kid"`

	// alg is the JWS algorithm published for the key.
	Algorithm string `json:"alg"`

	// notAfter is the expiry of the key's certificate.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// retiredAt is when the key stopped being the current key. Empty for the current key.
	// +optional
	RetiredAt *metav1.Time `json:"retiredAt,omitempty"`
	// publicKey is the key as published, a public JWK (JSON; without x5c when that would
	// take more than 8 KiB): what the controller publishes again when someone edits,
	// empties or replaces the ConfigMap, so that a retired key never leaves the set before
	// its TTL.
	// +kubebuilder:validation:MaxLength=8192
	// +optional
	PublicKey string `json:"publicKey,omitempty"`
}

// JWKSConfigStatus is the observed state of a JWKSConfig.
type JWKSConfigStatus struct {
	// conditions: Ready says whether the current certificate is published (reason
	// Published); Reconciling=True while a change is in progress, waited for (the Secret,
	// the update interval) or retried after an error; Stalled=True when only a change can
	// help (bad input, or a write the API server refuses: Forbidden, Invalid, TooLarge,
	// AdmissionDenied, QuotaExceeded). observedGeneration follows only generations that
	// became Ready or Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the last generation fully reconciled (Ready) or found stalled;
	// while a newer one is in progress (Reconciling) it lags behind metadata.generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastUpdateTime is when the published set last changed.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`

	// lastKeyID is the kid of the current key.
	// +optional
	LastKeyID string `json:"lastKeyID,omitempty"`

	// keyCount is the number of keys in the published set.
	// +optional
	KeyCount int32 `json:"keyCount,omitempty"`

	// nginxConfigUpdated is when the nginx configuration last changed.
	// +optional
	NginxConfigUpdated *metav1.Time `json:"nginxConfigUpdated,omitempty"`

	// keys lists the published keys, current first.
	// +listType=atomic
	// +optional
	Keys []PublishedKey `json:"keys,omitempty"`
	// signingKeyID is the kid of the key in spec.signingSecret: the one signers use.
	// +optional
	SigningKeyID string `json:"signingKeyID,omitempty"`
	// pendingKeyID is the kid of a published key waiting to be copied to
	// spec.signingSecret.
	// +optional
	PendingKeyID string `json:"pendingKeyID,omitempty"`
	// pendingPromotionTime is when pendingKeyID is copied to spec.signingSecret: once
	// every server has served it for cacheMaxAge plus the promotion margin. Empty while
	// the key is not yet served everywhere.
	// +optional
	PendingPromotionTime *metav1.Time `json:"pendingPromotionTime,omitempty"`
	// promotion is what the relying parties of spec.promotion last reported.
	// +optional
	Promotion *PromotionStatus `json:"promotion,omitempty"`
	// lastHandledReconcileAt is the value of the annotation
	// reconcile.trustplane.io/requestedAt that the last reconcile handled: equal to the
	// annotation once a reconcile asked for with it (`trustplane reconcile`) has run.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// PromotionStatus is what proves, or not yet, that the relying parties hold a key.
type PromotionStatus struct {
	// documentHashes are the sha256 hashes ("sha256:<hex>", as kube-apiserver reports
	// them) of the documents published since pendingKeyID was published, each holding it,
	// newest first: a relying party that last fetched one of them holds the key.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	DocumentHashes []string `json:"documentHashes,omitempty"`
	// relyingParties is, per spec.promotion.relyingParties entry, what it last reported.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	RelyingParties []RelyingPartyStatus `json:"relyingParties,omitempty"`
}

// RelyingPartyStatus is what one relying party last reported.
type RelyingPartyStatus struct {
	// name is the spec.promotion.relyingParties entry.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// lastHash is the hash of the set it last fetched, as it reports it ("" if none).
	// +kubebuilder:validation:MaxLength=80
	// +optional
	LastHash string `json:"lastHash,omitempty"`
	// lastFetchTime is when it last fetched the set successfully, by its own clock.
	// +optional
	LastFetchTime *metav1.Time `json:"lastFetchTime,omitempty"`
	// lastScrapeTime is when trustplane last read its metrics successfully.
	// +optional
	LastScrapeTime *metav1.Time `json:"lastScrapeTime,omitempty"`
	// holdsPendingKey is true when the set it last fetched holds status.pendingKeyID.
	// +optional
	HoldsPendingKey bool `json:"holdsPendingKey,omitempty"`
	// message says why it could not be read, or what it reports; empty when it holds the
	// pending key or none is pending.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// JWKSConfig publishes the public key of a TLS Secret as a JSON Web Key Set, in a
// ConfigMap, through nginx and through trustplane's own HTTP server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jwks,categories=trustplane
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 57",message="name must be a DNS label of at most 57 characters: it names the nginx Deployment and Service and the <name>-jwks ConfigMap"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.promotion) || has(self.spec.signingSecret) && size(self.spec.signingSecret) > 0",message="spec.promotion needs spec.signingSecret: only a key copied there is promoted",fieldPath=".spec.promotion"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.promotion) || has(self.spec.issuer) && size(self.spec.issuer) > 0 || self.spec.promotion.relyingParties.all(r, has(r.issuer))",message="each relying party needs an issuer when spec.issuer is not set, such as https://idp.example",fieldPath=".spec.promotion.relyingParties"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.signingSecret) || self.spec.signingSecret != self.spec.certificateSecret",message="spec.signingSecret must name another Secret than spec.certificateSecret: trustplane writes it, and copies keys into it only once they are served",fieldPath=".spec.signingSecret"
// +kubebuilder:validation:XValidation:rule="(has(self.spec.configMapName) && size(self.spec.configMapName) > 0 ? self.spec.configMapName : self.metadata.name + '-jwks') != (has(self.spec.nginxConfigMapName) && size(self.spec.nginxConfigMapName) > 0 ? self.spec.nginxConfigMapName : self.metadata.name + '-nginx')",message="spec.configMapName and spec.nginxConfigMapName must name different ConfigMaps (defaults <name>-jwks and <name>-nginx), such as issuer-jwks and issuer-nginx",fieldPath=".spec.configMapName"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Key ID",type=string,JSONPath=`.status.lastKeyID`,priority=1
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keyCount`
// +kubebuilder:printcolumn:name="Signing",type=string,JSONPath=`.status.signingKeyID`,priority=1
// +kubebuilder:printcolumn:name="Pending",type=string,JSONPath=`.status.pendingKeyID`,priority=1
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.status.pendingPromotionTime`,priority=1,description="When pendingKeyID is copied to spec.signingSecret (RFC 3339); empty while no promotion is pending"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JWKSConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired publication.
	// +required
	Spec JWKSConfigSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status JWKSConfigStatus `json:"status,omitempty"`
}

// JWKSConfigList is a list of JWKSConfig.
//
// +kubebuilder:object:root=true
type JWKSConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the JWKSConfigs.
	Items []JWKSConfig `json:"items"`
}

func init() {
	register(&JWKSConfig{}, &JWKSConfigList{})
}
