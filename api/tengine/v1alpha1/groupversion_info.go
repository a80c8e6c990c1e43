// Package v1alpha1 contains Tengine-Ingress's consistency checksum APIs (group
// tengine.taobao.org), wire-compatible with the Tengine-Ingress data plane.
//
// +kubebuilder:object:generate=true
// +groupName=tengine.taobao.org
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "tengine.taobao.org", Version: "v1alpha1"}

	// SchemeBuilder registers the types in this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
