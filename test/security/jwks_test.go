package security

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	jwksctrl "github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("take over a ConfigMap of her namespace through a JWKSConfig", takeOverConfigMap)
	register("choose the image trustplane runs in her namespace", chooseNginxImage)
}

// tlsSecret stores a certificate of alice's for a JWKSConfig to publish.
func tlsSecret(t *testing.T, alice *tenant, name string) {
	t.Helper()
	tlsSecretIn(t, alice.client, alice.namespace, name)
}

// tlsSecretIn stores a fresh certificate in namespace as c's user.
func tlsSecretIn(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "alice.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
}

// takeOverConfigMap: a JWKSConfig naming the platform's ConfigMap in alice's namespace
// (which she may not write) stalls with NameInUse; the ConfigMap is neither relabelled,
// overwritten nor deleted, cleanupOnDelete or not.
func takeOverConfigMap(t *testing.T, alice *tenant) {
	platform := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "platform-settings"}, Data: map[string]string{"quota": "10"}}
	mustCreate(t, env.Client, platform)
	tlsSecret(t, alice, "grab-tls")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "grab"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "grab-tls", ConfigMapName: platform.Name, CleanupOnDelete: true}}
	mustCreate(t, alice.client, cfg)
	testenv.Eventually(t, "the JWKSConfig to stall with NameInUse", 30*time.Second, func() bool {
		got := &jwksv1alpha1.JWKSConfig{}
		if err := alice.client.Get(ctx, client.ObjectKeyFromObject(cfg), got); err != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "Stalled")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == jwksv1alpha1.ReasonNameInUse
	})
	unchanged(t, platform)
	if err := alice.client.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the JWKSConfig to go", 30*time.Second, func() bool {
		return client.IgnoreNotFound(alice.client.Get(ctx, client.ObjectKeyFromObject(cfg), &jwksv1alpha1.JWKSConfig{})) == nil &&
			alice.client.Get(ctx, client.ObjectKeyFromObject(cfg), &jwksv1alpha1.JWKSConfig{}) != nil
	})
	unchanged(t, platform)
	if platform.Labels[jwksv1alpha1.OwnerLabel] != "" {
		t.Errorf("the platform's ConfigMap was labelled %v", platform.Labels)
	}
}

// chooseNginxImage: the image of the nginx Deployment is the operator's; a JWKSConfig
// that names one is refused under strict field validation and, under the default, runs
// the operator's image anyway.
func chooseNginxImage(t *testing.T, alice *tenant) {
	tlsSecret(t, alice, "miner-tls")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": jwksv1alpha1.GroupVersion.String(), "kind": "JWKSConfig",
		"metadata": map[string]any{"namespace": alice.namespace, "name": "miner"},
		"spec": map[string]any{"certificateSecret": "miner-tls",
			"nginx": map[string]any{"image": "attacker.example/miner:latest"}},
	}}
	err := alice.client.Create(ctx, obj.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.nginx.image"`) {
		t.Errorf("strict validation: %v, want the image field refused", err)
	}
	if err := alice.client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	deploy := &appsv1.Deployment{}
	testenv.Eventually(t, "the nginx Deployment", 30*time.Second, func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: "miner"}, deploy) == nil
	})
	for _, c := range deploy.Spec.Template.Spec.Containers {
		if c.Image != jwksctrl.DefaultNginxImage {
			t.Errorf("container %s runs %s, not the operator's image", c.Name, c.Image)
		}
	}
}
