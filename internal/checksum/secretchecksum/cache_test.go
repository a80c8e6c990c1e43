package secretchecksum

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
)

// A Secret applied with kubectl carries its whole content, tls.key included, in the
// last-applied-configuration annotation: the cache must keep neither, yet still know
// whether the pair loads.
func TestStripKeepsNoDataButTheOutcome(t *testing.T) {
	version := checksum.DefaultVersionAnnotation
	parsed := prometheus.NewCounter(prometheus.CounterOpts{Name: "parsed"})
	in := newInputs(version, &Metrics{parsed: parsed})
	good, other := newCert(t), newCert(t)
	resourceVersion := 0
	secret := func(uid, name string, crt, key []byte, ver string) *corev1.Secret {
		resourceVersion++
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID("u-" + uid), ResourceVersion: fmt.Sprint(resourceVersion), Name: name, Annotations: map[string]string{
				version: ver,
				"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"tls.key":"LS0tLS1CRUdJTi..."}}`,
			}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
			StringData: map[string]string{corev1.TLSPrivateKeyKey: "key"},
		}
	}
	strip := func(s *corev1.Secret) *corev1.Secret {
		out, err := in.stripSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Secret)
	}

	got := strip(secret("1", "site-1", good.PEM(), good.KeyPEM(), "3"))
	if got.Data != nil || got.StringData != nil || got.ManagedFields != nil {
		t.Errorf("data kept: %v %v %v", got.Data, got.StringData, got.ManagedFields)
	}
	if len(got.Annotations) != 1 || got.Annotations[version] != "3" {
		t.Errorf("annotations kept: %v", got.Annotations)
	}
	want, _ := checksum.SecretID("site-1", map[string]string{version: "3"}, version, map[string][]byte{
		corev1.TLSCertKey: good.PEM(), corev1.TLSPrivateKeyKey: good.KeyPEM()})
	if id, err := in.secretID(got); err != nil || id != want {
		t.Errorf("ID from the stripped copy: %q, %v; want %q", id, err, want)
	}

	// The key of another certificate: left out, though the cache never held the key.
	mismatched := strip(secret("2", "site-2", good.PEM(), other.KeyPEM(), "1"))
	if _, err := in.secretID(mismatched); err == nil {
		t.Error("a Secret whose key does not match its certificate was counted")
	} else if l, _ := checksum.IsLeftOut(err); l == nil || l.Reason != tenginev1alpha1.ReasonKeyMismatch {
		t.Errorf("mismatched pair: %v", err)
	}

	// Same data again (a new version, a label): not parsed again. The informer may also
	// hand the stripped copy back to the transform: that is no change either.
	before := counterValue(t, parsed)
	again := strip(secret("1", "site-1", good.PEM(), good.KeyPEM(), "4"))
	strip(again)
	if n := counterValue(t, parsed) - before; n != 0 {
		t.Errorf("unchanged data parsed %v times", n)
	}
	if id, err := in.secretID(again); err != nil || !strings.HasPrefix(id, "1-4-") {
		t.Errorf("after a second pass: %q, %v", id, err)
	}
	// New data: parsed once.
	strip(secret("1", "site-1", other.PEM(), other.KeyPEM(), "5"))
	if n := counterValue(t, parsed) - before; n != 1 {
		t.Errorf("changed data parsed %v times, want 1", n)
	}
	before = counterValue(t, parsed)
	// Unversioned: never parsed, and not counted.
	unversioned := secret("3", "tls-9", good.PEM(), good.KeyPEM(), "")
	delete(unversioned.Annotations, version)
	if _, err := in.secretID(strip(unversioned)); err == nil || counterValue(t, parsed)-before != 0 {
		t.Errorf("unversioned Secret: %v, parsed %v", err, counterValue(t, parsed)-before)
	}

	// Of an Ingress, what Tengine-Ingress's class rules read stays: its class name and
	// class annotation (a tenant's huge one cut, so it equals no class); nothing else.
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"other": "x"}},
		Spec: networkingv1.IngressSpec{IngressClassName: new("tengine"), Rules: []networkingv1.IngressRule{{Host: "a.example.com"}}}}
	out, _ := in.stripIngress(ing)
	if got := out.(*networkingv1.Ingress); got.Annotations != nil || got.Spec.IngressClassName == nil || *got.Spec.IngressClassName != "tengine" || got.Spec.Rules != nil {
		t.Errorf("ingress kept: %v %+v", got.Annotations, got.Spec)
	}
	huge := strings.Repeat("t", 200_000)
	ing = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{checksum.IngressClassAnnotation: huge}}}
	out, _ = in.stripIngress(ing)
	if got := out.(*networkingv1.Ingress).Annotations[checksum.IngressClassAnnotation]; len(got) > 256 || got == huge {
		t.Errorf("class annotation kept at %d bytes", len(got))
	}
	ing = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{checksum.IngressClassAnnotation: "tengine"}}}
	out, _ = in.stripIngress(ing)
	if got := out.(*networkingv1.Ingress).Annotations; len(got) != 1 || got[checksum.IngressClassAnnotation] != "tengine" {
		t.Errorf("class annotation kept as %v", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 { return counter(t, c) }

// TestStripBoundsWhatIsKept: whatever a tenant puts into a Secret — a 900 KB tls.crt, a
// 200 KB version annotation, labels, owner references — the cache keeps a bounded copy,
// and the checksum comes out as from the whole Secret.
func TestStripBoundsWhatIsKept(t *testing.T) {
	version := checksum.DefaultVersionAnnotation
	in := newInputs(version, &Metrics{parsed: prometheus.NewCounter(prometheus.CounterOpts{Name: "parsed"})})
	c := newCert(t)
	// A real certificate first (Tengine reads the first block), padded to 900 KB.
	large := bytes.Repeat(c.PEM(), 900_000/len(c.PEM())+1)
	secret := func(uid, name, ver string) *corev1.Secret {
		labels := map[string]string{}
		for i := range 1000 {
			labels[fmt.Sprintf("l%d", i)] = strings.Repeat("v", 63)
		}
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: "1", Name: name, Namespace: "edge", Labels: labels,
				Annotations:     map[string]string{version: ver, "other": strings.Repeat("x", 100_000)},
				OwnerReferences: []metav1.OwnerReference{{Name: "o", UID: "x"}}, Finalizers: []string{"f"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{corev1.TLSCertKey: large, corev1.TLSPrivateKeyKey: c.KeyPEM()},
		}
	}
	kept := func(s *corev1.Secret) int {
		out, err := in.stripSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.Secret)
		if got.Data != nil || got.Labels != nil || got.OwnerReferences != nil || got.Finalizers != nil || got.Type != "" {
			t.Errorf("%s: kept data %d, labels %d, owners %v, finalizers %v, type %q", s.Name, len(got.Data), len(got.Labels), got.OwnerReferences, got.Finalizers, got.Type)
		}
		if got.Name != s.Name || got.Namespace != "edge" || got.UID != s.UID {
			t.Errorf("%s: identity lost: %s/%s %s", s.Name, got.Namespace, got.Name, got.UID)
		}
		size := 0
		for k, v := range got.Annotations {
			size += len(k) + len(v)
		}
		return size
	}

	// A 900 KB tls.crt that loads is counted, with the PemSHA of its first certificate.
	// Its version has 100 leading zeros: still 42, kept as "42".
	padded := strings.Repeat("0", 100) + "42"
	big := secret("u-big", "site-7", padded)
	whole, err := checksum.SecretID("site-7", map[string]string{version: padded}, version, big.Data)
	if err != nil {
		t.Fatal(err)
	}
	if n := kept(big); n > len(version)+maxKeptVersionBytes+3 {
		t.Errorf("kept %d bytes of annotations", n)
	}
	if id, err := in.secretID(big); err != nil || id != whole || !strings.HasPrefix(id, "7-42-") {
		t.Errorf("900 KB tls.crt: ID %q, %v; want %q", id, err, whole)
	}

	// A huge version that is no integer: 64 bytes kept, and left out for the same reason.
	huge := strings.Repeat("9z", 100_000)
	_, want := checksum.Version(map[string]string{version: huge}, version)
	odd := secret("u-odd", "site-8", huge)
	if n := kept(odd); n > len(version)+maxKeptVersionBytes+3 {
		t.Errorf("kept %d bytes of a 200 KB version annotation", n)
	}
	_, got := in.secretID(odd)
	if l, _ := checksum.IsLeftOut(got); l == nil || l.Reason != tenginev1alpha1.ReasonNoVersion {
		t.Errorf("huge version: %v; want the reason of %v", got, want)
	} else if len(l.Message) > 200 {
		t.Errorf("left-out message is %d bytes", len(l.Message))
	}
}
