package jwks

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// countingReader counts the Secrets read through it.
type countingReader struct {
	client.Reader
	reads int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestUnchangedSecretIsNotReadAgain: while the Secret watch shows the Secret at the version
// its key was parsed from, the key is taken without reading the Secret; a new version, a
// Secret the watch does not hold, or another spec.algorithm read it again.
func TestUnchangedSecretIsNotReadAgain(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	chain := func(cn string) testcerts.Chain {
		t.Helper()
		key, err := testcerts.NewKey(testcerts.P256)
		if err != nil {
			t.Fatal(err)
		}
		c, err := testcerts.NewChain(key, cn, now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kid := func(c testcerts.Chain) string {
		k, err := jwkset.ParseChain(c.PEM(), "", now)
		if err != nil {
			t.Fatal(err)
		}
		return k.KeyID()
	}
	first, second := chain("first"), chain("second")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: first.PEM()}}
	cluster := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	live := &countingReader{Reader: cluster}
	r := &Reconciler{APIReader: live, SecretMetadata: cluster}
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "set"}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"}}

	want := func(step string, c testcerts.Chain, reads int) {
		t.Helper()
		key, err := r.currentKey(ctx, cfg, now)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if key.KeyID() != kid(c) || live.reads != reads {
			t.Fatalf("%s: kid %s after %d Secret reads, want %s after %d", step, key.KeyID(), live.reads, kid(c), reads)
		}
	}
	want("first reconcile", first, 1)
	want("unchanged", first, 1)
	want("unchanged again", first, 1)

	if err := cluster.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[corev1.TLSCertKey] = second.PEM()
	if err := cluster.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	want("rotated", second, 2)
	want("rotated, unchanged since", second, 2)

	cfg.Spec.Algorithm = "ES256"
	want("another algorithm", second, 3)

	r.SecretMetadata = fake.NewClientBuilder().WithScheme(scheme.New()).Build() // a watch that has not seen it
	want("not in the watch", second, 4)
	r.SecretMetadata = nil
	want("no watch", second, 5)
}
