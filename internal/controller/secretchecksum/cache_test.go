package secretchecksum

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/checksum"
)

// A Secret applied with kubectl carries its whole content, tls.key included, in the
// last-applied-configuration annotation: the cache must keep neither.
func TestStripKeepsOnlyWhatTheFormulaReads(t *testing.T) {
	version := checksum.DefaultVersionAnnotation
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "site", Annotations: map[string]string{
			version: "3",
			"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"tls.key":"LS0tLS1CRUdJTi..."}}`,
		}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key"), "ca.crt": []byte("ca")},
		StringData: map[string]string{corev1.TLSPrivateKeyKey: "key"},
	}
	out, err := stripSecret(version)(secret)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Secret)
	if len(got.Data) != 1 || string(got.Data[corev1.TLSCertKey]) != "cert" || got.StringData != nil || got.ManagedFields != nil {
		t.Errorf("data kept: %v %v %v", got.Data, got.StringData, got.ManagedFields)
	}
	if len(got.Annotations) != 1 || got.Annotations[version] != "3" {
		t.Errorf("annotations kept: %v", got.Annotations)
	}

	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"other": "x"}},
		Spec: networkingv1.IngressSpec{IngressClassName: new("tengine")}}
	out, _ = stripIngress(version)(ing)
	if got := out.(*networkingv1.Ingress); got.Annotations != nil || got.Spec.IngressClassName != nil {
		t.Errorf("ingress kept: %v %+v", got.Annotations, got.Spec)
	}
}
