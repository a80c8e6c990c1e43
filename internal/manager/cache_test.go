package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMetadataOnlyObjectsKeepNoAppliedCopy: a Secret applied with kubectl carries its
// data in an annotation; the metadata cache keeps the other annotations only.
func TestMetadataOnlyObjectsKeepNoAppliedCopy(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"tls.key":"..."}}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := stripMetadataOnly(m)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok || got.Annotations["keep"] != "me" || got.ManagedFields != nil {
		t.Errorf("kept %v, managed fields %v", got.Annotations, got.ManagedFields)
	}
	typed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "x"}}}
	if out, _ := stripMetadataOnly(typed); out.(*corev1.Secret).Annotations[corev1.LastAppliedConfigAnnotation] != "x" {
		t.Error("a typed object was changed")
	}
}
