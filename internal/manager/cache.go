package manager

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripMetadataOnly is the shared cache's transform for objects watched as metadata only
// (Secrets, for the controllers that read their data uncached). `kubectl apply` records
// the whole object it applied in an annotation, which for a Secret holds its data, keys
// included, and managed fields are of no use to a metadata watch: neither is kept in
// memory. Typed objects pass unchanged.
func stripMetadataOnly(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		delete(m.Annotations, corev1.LastAppliedConfigAnnotation)
		m.ManagedFields = nil
	}
	return obj, nil
}
