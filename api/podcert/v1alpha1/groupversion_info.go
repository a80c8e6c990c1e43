// Package v1alpha1 contains the PodIdentityPolicy API: what the pods of a namespace may
// have in their pod certificates beyond the SPIFFE ID the podcertificate-signer always
// writes.
//
// +kubebuilder:object:generate=true
// +groupName=podcert.trustplane.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "podcert.trustplane.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types in this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the types in this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds the package's kinds to the group version; each type file calls it.
func register(objs ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		return nil
	})
}
