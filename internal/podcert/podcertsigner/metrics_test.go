package podcertsigner

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestSignerMetrics: the signing CA's validity and whether a next CA is lined up (what
// TrustplanePodCertificateCANearExpiry reads), and the requests issued and denied, by
// signer_name.
func TestSignerMetrics(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName = "metrics.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "metrics-ca"
	opts.KeyTypes = []string{"ECDSAP256"}
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	node, pod := world(t, "signer-metrics")
	signer := map[string]string{"signer_name": opts.SignerName}
	value := func(metric string, labels map[string]string) float64 {
		v, _ := testenv.MetricValue(t, metric, labels)
		return v
	}

	// The CA the signer made for itself.
	var ca *x509.Certificate
	testenv.Eventually(t, "the signer's CA", 20*time.Second, func() bool {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.CASecretName}, secret); err != nil {
			return false
		}
		block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		var err error
		ca, err = x509.ParseCertificate(block.Bytes)
		return err == nil
	})
	testenv.Eventually(t, "the CA's validity exported", 20*time.Second, func() bool {
		return value("trustplane_podcertificate_signer_ca_not_after_seconds", signer) == float64(ca.NotAfter.Unix()) &&
			value("trustplane_podcertificate_signer_ca_not_before_seconds", signer) == float64(ca.NotBefore.Unix())
	})
	if v, ok := testenv.MetricValue(t, "trustplane_podcertificate_signer_next_ca", signer); !ok || v != 0 {
		t.Errorf("trustplane_podcertificate_signer_next_ca = %v (present %v) with no next CA", v, ok)
	}

	// One issued, one denied (a key type it does not issue).
	issued := map[string]string{"signer_name": opts.SignerName, "outcome": "issued"}
	denied := map[string]string{"signer_name": opts.SignerName, "outcome": "denied"}
	if v, ok := testenv.MetricValue(t, "trustplane_podcertificate_signer_requests_total", issued); !ok || v != 0 {
		t.Errorf("issued requests before any: %v (present %v), want 0", v, ok)
	}
	if c := waitConcluded(t, request(t, node, pod, opts.SignerName, "ECDSAP256")).Status.Conditions[0]; c.Type != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("ECDSAP256: %+v", c)
	}
	if c := waitConcluded(t, request(t, node, pod, opts.SignerName, "ED25519")).Status.Conditions[0]; c.Type != certificatesv1.PodCertificateRequestConditionTypeDenied {
		t.Fatalf("ED25519: %+v", c)
	}
	// The signer counts a request once its status write returned, a moment after the
	// test can read that status.
	var i, d float64
	testenv.Eventually(t, "one request issued and one denied, counted", 10*time.Second, func() bool {
		i, d = value("trustplane_podcertificate_signer_requests_total", issued), value("trustplane_podcertificate_signer_requests_total", denied)
		return i >= 1 && d >= 1
	})
	if i != 1 || d != 1 {
		t.Errorf("requests issued %v, denied %v; want 1 and 1", i, d)
	}

	// An operator supplies the next CA: lined up for an overlap (1h) before it signs.
	next, err := podcert.NewCA("next", time.Now(), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.CASecretName}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[podcert.NextCertKey], secret.Data[podcert.NextKeyKey] = next.CertPEM, next.KeyPEM
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the next CA exported", 20*time.Second, func() bool {
		return value("trustplane_podcertificate_signer_next_ca", signer) == 1
	})
	if v := value("trustplane_podcertificate_signer_ca_not_after_seconds", signer); v != float64(ca.NotAfter.Unix()) {
		t.Errorf("the signing CA's notAfter changed to %v before the next one signs", v)
	}
}
