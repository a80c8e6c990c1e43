package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExtendedKeyUsage is an X.509 extended key usage a pod certificate may carry.
// +kubebuilder:validation:Enum=ServerAuth;ClientAuth
type ExtendedKeyUsage string

const (
	// ExtendedKeyUsageServerAuth lets the certificate serve TLS (id-kp-serverAuth).
	ExtendedKeyUsageServerAuth ExtendedKeyUsage = "ServerAuth"
	// ExtendedKeyUsageClientAuth lets the certificate authenticate a TLS client (id-kp-clientAuth).
	ExtendedKeyUsageClientAuth ExtendedKeyUsage = "ClientAuth"
)

// DefaultSignerName is the signerName a policy applies to unless it names another.
const DefaultSignerName = "trustplane.io/pod-identity"

// PodIdentityPolicySpec says, per ServiceAccount of the policy's namespace, what its pods'
// certificates from one signer carry besides the SPIFFE ID
// spiffe://<trust domain>/ns/<namespace>/sa/<serviceaccount>, which they always carry.
// The SPIFFE ID stays the only URI SAN: an X.509-SVID has exactly one.
type PodIdentityPolicySpec struct {
	// signerName is the signer whose certificates this policy shapes.
	// +kubebuilder:default="trustplane.io/pod-identity"
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=571
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$')",message="must be a signer name, <domain>/<path>, such as trustplane.io/pod-identity"
	// +optional
	SignerName string `json:"signerName,omitempty"`

	// serviceAccounts lists what each ServiceAccount's pods may carry. A ServiceAccount
	// listed by several policies of the namespace gets the union of their DNS names; its
	// extended key usages are those of the policy listed first by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +required
	ServiceAccounts []ServiceAccountIdentity `json:"serviceAccounts"`
}

// ServiceAccountIdentity is what the pods of one ServiceAccount may carry.
type ServiceAccountIdentity struct {
	// name of the ServiceAccount in the policy's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ServiceAccount name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as web"
	// +required
	Name string `json:"name"`

	// dnsNames are the DNS names (exact, in lower case: no wildcards) the pods may carry as DNS SANs:
	// names of this namespace's Services only, `<service>.<namespace>.svc` or
	// `<service>.<namespace>.svc.<cluster domain>` (a headless Service's pod names,
	// `<hostname>.<service>.<namespace>.svc…`, too; the cluster domain is the signer's
	// --podcertificate-signer-cluster-domain, default cluster.local). The trustplane-pod-identity-policies
	// admission policy refuses any other name, and the signer ignores one that got in
	// without it. A pod gets all of them unless its PodCertificateRequest's
	// unverifiedUserAnnotations ask for fewer (podcert.trustplane.io/dns-names); it can
	// never ask for more.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`

	// extendedKeyUsages the certificates carry. Unset: both ServerAuth and ClientAuth, as
	// without a policy.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +optional
	ExtendedKeyUsages []ExtendedKeyUsage `json:"extendedKeyUsages,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=trustplane
// +kubebuilder:printcolumn:name="Signer",type=string,JSONPath=`.spec.signerName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PodIdentityPolicy is an operator's allow-list of what the pods of its namespace may have
// in their pod certificates besides their SPIFFE ID: DNS names of the namespace's own
// Services, and extended key usages. Nothing a pod writes widens it. See docs/podcert.md,
// "Which identities a pod may claim".
type PodIdentityPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the allow-list.
	// +required
	Spec PodIdentityPolicySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// PodIdentityPolicyList is a list of PodIdentityPolicies.
type PodIdentityPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the policies.
	Items []PodIdentityPolicy `json:"items"`
}

func init() {
	register(&PodIdentityPolicy{}, &PodIdentityPolicyList{})
}
