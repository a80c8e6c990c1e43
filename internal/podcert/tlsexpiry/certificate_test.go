package tlsexpiry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/testcerts"
)

func newChain(t *testing.T, notBefore time.Time, lifetime time.Duration) testcerts.Chain {
	t.Helper()
	key, _ := testcerts.NewKey(testcerts.P256)
	c, err := testcerts.NewChain(key, "tls-expiry", notBefore, notBefore.Add(lifetime))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// padded is a tls.crt above limit bytes that still starts with a valid certificate, so
// only its size can keep it out.
func padded(c testcerts.Chain, limit int) []byte {
	return bytes.Repeat(c.PEM(), limit/len(c.PEM())+2)
}

// TestTransformKeepsOnlyDerivedValues: the cached copy holds the certificate's
// fingerprint and validity, and no byte of tls.crt, tls.key, any other key, the
// last-applied-configuration (which holds them all) or the managed fields.
func TestTransformKeepsOnlyDerivedValues(t *testing.T) {
	c := newChain(t, time.Now().Add(-time.Hour).Truncate(time.Second), 24*time.Hour)
	crt := c.PEM()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web-tls", UID: types.UID("u-1"), Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"tls.key":"LS0tLS1CRUdJTi..."}}`,
		}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: c.KeyPEM(), "ca.crt": crt},
		StringData: map[string]string{"extra": "x"},
	}
	transform := Transform(DefaultMaxCertificateBytes)
	out, err := transform(secret)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Secret)
	if got.Data != nil || got.StringData != nil || got.ManagedFields != nil {
		t.Fatalf("data kept: %d keys, %d string keys, %d managed fields", len(got.Data), len(got.StringData), len(got.ManagedFields))
	}
	for k, v := range got.Annotations {
		if k != certificateAnnotation && k != macAnnotation {
			t.Errorf("annotation %s kept", k)
		}
		if strings.Contains(v, "BEGIN") || strings.Contains(v, "LS0t") {
			t.Errorf("annotation %s holds PEM: %s", k, v)
		}
	}
	if size := len(got.Annotations[certificateAnnotation]); size > 256 {
		t.Errorf("derived value is %d bytes; want a few dozen", size)
	}

	sum := sha256.Sum256(crt)
	want := certificate{SHA256: hex.EncodeToString(sum[:]), Bytes: len(crt), NotBefore: c.Leaf.NotBefore, NotAfter: c.Leaf.NotAfter}
	check := func(what string, s *corev1.Secret) {
		t.Helper()
		cert := certificateOf(s, DefaultMaxCertificateBytes)
		if cert.SHA256 != want.SHA256 || cert.Bytes != want.Bytes || cert.Problem != "" ||
			!cert.NotBefore.Equal(want.NotBefore) || !cert.NotAfter.Equal(want.NotAfter) {
			t.Errorf("%s: derived %+v, want %+v", what, cert, want)
		}
	}
	check("stripped copy", got)
	// The informer may hand the stripped copy to the transform again: nothing is lost.
	again, _ := transform(got)
	check("transformed twice", again.(*corev1.Secret))

	// A Secret its owner annotated with our annotation is not believed: it has no
	// certificate, whatever the annotation says.
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forged", UID: types.UID("u-2"),
		Annotations: map[string]string{certificateAnnotation: got.Annotations[certificateAnnotation], macAnnotation: got.Annotations[macAnnotation]}}}
	out, _ = transform(forged)
	if cert := certificateOf(out.(*corev1.Secret), DefaultMaxCertificateBytes); cert.Problem != problemInvalid {
		t.Errorf("a forged annotation was believed: %+v", cert)
	}
}

// TestOversizedCertificateIsNotParsed: above the limit tls.crt is hashed, never parsed,
// and the cached copy still holds nothing of it.
func TestOversizedCertificateIsNotParsed(t *testing.T) {
	c := newChain(t, time.Now(), time.Hour)
	crt := padded(c, 8192)
	if cert := derive(crt, 8192); cert.Problem != problemTooLarge || !cert.NotAfter.IsZero() || cert.Bytes != len(crt) {
		t.Errorf("oversized: %+v", cert)
	}
	if cert := derive(crt, len(crt)); cert.Problem != "" || !cert.NotAfter.Equal(c.Leaf.NotAfter) {
		t.Errorf("at the limit exactly: %+v", cert)
	}
	out, _ := Transform(8192)(&corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: crt}})
	if s := out.(*corev1.Secret); s.Data != nil || len(s.Annotations[certificateAnnotation]) > 256 {
		t.Errorf("oversized certificate kept: %d data keys, annotation %q", len(s.Data), s.Annotations[certificateAnnotation])
	}
}

func TestValidateMaxCertificateBytes(t *testing.T) {
	opts := DefaultOptions()
	if err := opts.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	opts.MaxCertificateBytes = 100
	err := opts.Validate()
	if err == nil || !strings.Contains(err.Error(), "--tls-expiry-secret-max-certificate-bytes=100") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a 100-byte limit: %v", err)
	}
}

// TestOversizedSecretIsLeftOutWithAWarning runs the controller through its cache: an
// expired certificate inside an oversized tls.crt gets CertificateTooLarge, once, and no
// CertificateExpired (it is left out), while a normal Secret beside it is watched with
// the validity of its leaf.
func TestOversizedSecretIsLeftOutWithAWarning(t *testing.T) {
	ns := env.Namespace(t, "tls-size")
	const limit = 8192
	expired := newChain(t, time.Now().Add(-3*time.Hour), time.Hour)
	fresh := newChain(t, time.Now().Add(-time.Hour).Truncate(time.Second), 24*time.Hour)
	for name, crt := range map[string][]byte{"big-tls": padded(expired, limit), "ok-tls": fresh.PEM()} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: expired.KeyPEM()}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	opts := DefaultOptions()
	opts.MaxCertificateBytes = limit
	var r *Reconciler
	env.RunManager(t, func(mgr ctrl.Manager) error { var err error; r, err = Setup(mgr, opts); return err })

	warnings := func() map[string][]string {
		list := &corev1.EventList{}
		_ = env.Client.List(ctx, list, client.InNamespace(ns))
		out := map[string][]string{}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning {
				out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e.Reason)
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(strings.Join(warnings()["big-tls"], ","), certificates.ReasonTooLarge) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s event on the oversized Secret (saw %v)", certificates.ReasonTooLarge, warnings())
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for gauge(t, ns, "ok-tls") == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := int64(gauge(t, ns, "ok-tls")); got != fresh.Leaf.NotAfter.Unix() {
		t.Errorf("not-after of the normal Secret: %d, want %d", got, fresh.Leaf.NotAfter.Unix())
	}
	// Touch the oversized Secret (same certificate): no second warning, still no expiry.
	big := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "big-tls"}, big); err != nil {
		t.Fatal(err)
	}
	big.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, big); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	reasons := warnings()["big-tls"]
	if strings.Count(strings.Join(reasons, ","), certificates.ReasonTooLarge) != 1 || strings.Contains(strings.Join(reasons, ","), certificates.ReasonExpired) {
		t.Errorf("oversized Secret's warnings: %v; want one %s and no %s", reasons, certificates.ReasonTooLarge, certificates.ReasonExpired)
	}
	r.mu.Lock()
	state := r.certs[types.NamespacedName{Namespace: ns, Name: "big-tls"}].state
	r.mu.Unlock()
	if state != stateTooLarge {
		t.Errorf("state %q, want %q", state, stateTooLarge)
	}
	// What the cache holds of it: no data.
	cached := &corev1.Secret{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: "big-tls"}, cached); err != nil {
		t.Fatal(err)
	}
	if cached.Data != nil {
		t.Errorf("the cache holds the oversized Secret's data: %d keys", len(cached.Data))
	}
}

func gauge(t *testing.T, ns, name string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := notAfterGauge.WithLabelValues(ns, name).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
