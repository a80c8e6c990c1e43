package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/podcert"
)

func TestAnnotationOptIn(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	if got := podcert.Projections(withAnnotationProjection(plain)); len(got) != 0 {
		t.Errorf("a pod without the annotation got projections: %v", got)
	}
	opted := plain.DeepCopy()
	opted.Annotations = map[string]string{SignerAnnotation: "example.com/s", KeyTypeAnnotation: "ED25519"}
	got := podcert.Projections(withAnnotationProjection(opted))
	if len(got) != 1 {
		t.Fatalf("projections: %v", got)
	}
	for key, src := range got {
		if key.VolumeName != annotationVolume || src.SignerName != "example.com/s" || src.KeyType != "ED25519" {
			t.Errorf("projection %v %+v", key, src)
		}
	}
	if len(opted.Spec.Volumes) != 0 {
		t.Error("the cached pod was modified")
	}
	defaulted := plain.DeepCopy()
	defaulted.Annotations = map[string]string{SignerAnnotation: "example.com/s"}
	for _, src := range podcert.Projections(withAnnotationProjection(defaulted)) {
		if src.KeyType != "ECDSAP256" {
			t.Errorf("default key type %s", src.KeyType)
		}
	}
}
