package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SecretCheckSumSpec defines the desired state of SecretCheckSum.
type SecretCheckSumSpec struct {
	// Checksum value which generated using a hash method: the lower-case hex MD5 of the
	// sorted secret IDs joined with ",".
	// +optional
	Checksum string `json:"checksum,omitempty"`

	// The IDs of all Secret are used to calculate the checksum. When the checksum is
	// inconsistent, it can be used to compare the differences. Each is
	// "<SecretID>-<Version>-<PemSHA>".
	// +optional
	IDs []string `json:"ids,omitempty"`

	// The timestamp when the checksum was generated.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// RFC 3339 with an upper-case T and Z, as Go reads it (the date-time format alone lets a
	// lower-case "t" through, which no data plane could decode).
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`
	// +required
	Timestamp metav1.Time `json:"timestamp"`
}

// SecretCheckSum is the Schema for the secretchecksums API: the control plane's view of
// every TLS Secret in a namespace, which data planes compare with their own before they
// trust the secrets they see.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=scs,categories=trustplane
// +kubebuilder:printcolumn:name="Checksum",type=string,JSONPath=`.spec.checksum`
// +kubebuilder:printcolumn:name="Timestamp",type=string,JSONPath=`.spec.timestamp`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretCheckSum struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the published checksum.
	// +optional
	Spec SecretCheckSumSpec `json:"spec,omitempty"`
}

// SecretCheckSumList is a list of SecretCheckSum.
//
// +kubebuilder:object:root=true
type SecretCheckSumList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SecretCheckSums.
	Items []SecretCheckSum `json:"items"`
}

// IngressCheckSumSpec defines the desired state of IngressCheckSum.
type IngressCheckSumSpec struct {
	// Checksum value which generated using a hash method: the lower-case hex MD5 of the
	// sorted ingress IDs joined with ",".
	// +optional
	Checksum string `json:"checksum,omitempty"`

	// The IDs of all Ingress are used to calculate the checksum; each is "<ID>-<Version>".
	// +optional
	IDs []string `json:"ids,omitempty"`

	// The timestamp when the checksum was generated.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// RFC 3339 with an upper-case T and Z, as Go reads it (the date-time format alone lets a
	// lower-case "t" through, which no data plane could decode).
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`
	// +required
	Timestamp metav1.Time `json:"timestamp"`
}

// IngressCheckSum is the same consistency checksum for Ingress objects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ics,categories=trustplane
// +kubebuilder:printcolumn:name="Checksum",type=string,JSONPath=`.spec.checksum`
// +kubebuilder:printcolumn:name="Timestamp",type=string,JSONPath=`.spec.timestamp`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IngressCheckSum struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the published checksum.
	// +optional
	Spec IngressCheckSumSpec `json:"spec,omitempty"`
}

// IngressCheckSumList is a list of IngressCheckSum.
//
// +kubebuilder:object:root=true
type IngressCheckSumList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the IngressCheckSums.
	Items []IngressCheckSum `json:"items"`
}

func init() {
	register(&SecretCheckSum{}, &SecretCheckSumList{}, &IngressCheckSum{}, &IngressCheckSumList{})
}
