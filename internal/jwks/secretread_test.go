package jwks

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// versionedReader records the resourceVersion each read asked for ("": the newest), and
// fails the reads at a version with atVersion when it is set.
type versionedReader struct {
	client.Reader
	asked     []string
	atVersion error
}

func (v *versionedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	rv := ""
	for _, o := range opts {
		if g, ok := o.(*client.GetOptions); ok && g.Raw != nil {
			rv = g.Raw.ResourceVersion
		}
	}
	v.asked = append(v.asked, rv)
	if rv != "" && v.atVersion != nil {
		return v.atVersion
	}
	return v.Reader.Get(ctx, key, obj, opts...)
}

// TestTheSecretIsReadAtTheVersionItsWatchShows: a Secret is read as the API server has it
// at least at the version the Secret watch shows, which the API server answers from its
// watch cache without reading etcd; at the newest version only when the watch has not
// seen it, or when the API server cannot answer at that version.
func TestTheSecretIsReadAtTheVersionItsWatchShows(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "watched", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM()}}
	cluster := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	if err := cluster.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	config := func(name string) *jwksv1alpha1.JWKSConfig {
		return &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"}}
	}
	for _, tc := range []struct {
		name      string
		watch     client.Reader
		atVersion error
		want      []string
	}{
		{"watched", cluster, nil, []string{secret.ResourceVersion}},
		{"not answered at that version", cluster, apierrors.NewTimeoutError("Too large resource version", 1), []string{secret.ResourceVersion, ""}},
		{"not in the watch", fake.NewClientBuilder().WithScheme(scheme.New()).Build(), nil, []string{""}},
		{"no watch", nil, nil, []string{""}},
	} {
		live := &versionedReader{Reader: cluster, atVersion: tc.atVersion}
		r := &Reconciler{APIReader: live}
		if tc.watch != nil {
			r.SecretMetadata = tc.watch
		}
		if _, err := r.currentKey(ctx, config(tc.name), now); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !slices.Equal(live.asked, tc.want) {
			t.Errorf("%s: the Secret was read at versions %q, want %q", tc.name, live.asked, tc.want)
		}
	}
}
