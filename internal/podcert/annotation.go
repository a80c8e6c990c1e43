package podcert

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trustplane/trustplane/api/certificates"
)

// AnnotationVolume is the volume name of the projection the node agent serves for a pod
// opted in by annotation (certificates.SignerAnnotation) rather than by a projected
// volume: its requests and its report carry it.
const AnnotationVolume = "podcert-annotation"

// DefaultAnnotationKeyType is the key type of that projection unless
// certificates.KeyTypeAnnotation names another.
const DefaultAnnotationKeyType = "ECDSAP256"

// WithAnnotationProjection is pod with the projection an opted-in pod is served, as a
// volume the node agent (and `trustplane podcert inspect`) treats as any other; pod itself
// when it is not opted in.
func WithAnnotationProjection(pod *corev1.Pod) *corev1.Pod {
	signer := pod.Annotations[certificates.SignerAnnotation]
	if signer == "" {
		return pod
	}
	keyType := pod.Annotations[certificates.KeyTypeAnnotation]
	if keyType == "" {
		keyType = DefaultAnnotationKeyType
	}
	pod = pod.DeepCopy()
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: AnnotationVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: keyType}}}}}})
	return pod
}
