package cli_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// newChain is a P-256 certificate chain valid for a day.
func newChain(t *testing.T) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	c, err := testcerts.NewChain(key, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// publishSet writes what the jwks controller would for cfg and chain: the JWK Set
// ConfigMap and the status.
func publishSet(t *testing.T, cfg *jwksv1alpha1.JWKSConfig, chain testcerts.Chain) string {
	t.Helper()
	key, err := jwkset.ParseChain(chain.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name + "-jwks"}, Data: map[string]string{jwkset.DocumentKey: string(doc)}})
	cfg.Status = jwksv1alpha1.JWKSConfigStatus{Conditions: readyCondition(metav1.ConditionTrue, jwksv1alpha1.ReasonPublished, "Publishing 1 key(s)"),
		ObservedGeneration: cfg.Generation, LastKeyID: key.KeyID(), KeyCount: 1,
		Keys: []jwksv1alpha1.PublishedKey{{KeyID: key.KeyID(), Algorithm: "ES256", NotAfter: &metav1.Time{Time: key.NotAfter}}}}
	setStatus(t, cfg)
	return key.KeyID()
}

func TestDescribeJWKSConfig(t *testing.T) {
	ns := env.Namespace(t, "describe")
	chain := newChain(t)
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(true)}}}
	create(t, cfg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
	kid := publishSet(t, cfg, chain)
	create(t, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer.published"},
		InvolvedObject: corev1.ObjectReference{Kind: "JWKSConfig", APIVersion: jwksv1alpha1.GroupVersion.String(), Namespace: ns, Name: "issuer", UID: cfg.UID},
		Reason:         jwksv1alpha1.ReasonPublished, Message: "Published key " + kid, Type: corev1.EventTypeNormal, LastTimestamp: metav1.Now(),
		Source: corev1.EventSource{Component: "trustplane-jwks"}})

	out := tp(t, "describe", "jwksconfig", "issuer", "-n", ns).ok(t)
	want := []string{
		"JWKSConfig " + ns + "/issuer Ready=True Published age ",
		"├─Conditions",
		"│ └─Ready=True Published: Publishing 1 key(s)",
		"├─Secret " + ns + "/issuer-tls (certificate): kid " + kid + ", certificate expires in 23h",
		"│ └─ConfigMap " + ns + "/issuer-jwks (JWK Set): 1 keys: " + kid + " (ES256)",
		"│   ├─Deployment " + ns + "/issuer (nginx): not found",
		"│   └─Service " + ns + "/issuer (nginx): not found",
		"├─Published keys",
		"└─Events",
		"  └─",
		" Normal Published: Published key " + kid,
	}
	contains(t, out, want...)
	for _, secret := range [][]byte{chain.KeyPEM()} {
		if strings.Contains(out, string(secret[30:60])) || strings.Contains(out, "PRIVATE") {
			t.Error("describe shows the key")
		}
	}
}

func TestDescribeCluster(t *testing.T) {
	ns := env.Namespace(t, "describe")
	other := env.Namespace(t, "tenant")
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: operatorv1alpha1.ClusterSpec{Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "aws"}, KubeconfigRequestNamespaces: []string{other}}}
	sr := &controlplanev1alpha1.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: controlplanev1alpha1.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}}
	rules := &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	create(t, cluster, sr,
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "prod", ClusterRole: rules}},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "tenant"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "prod", ClusterNamespace: ns, ClusterRole: rules}},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "other", ClusterRole: rules}},
	)
	cluster.Status = operatorv1alpha1.ClusterStatus{ShootName: "c-7654321", Conditions: append(readyCondition(metav1.ConditionFalse, operatorv1alpha1.ReasonProvisioning, "Shoot is being created (40%)"),
		metav1.Condition{Type: operatorv1alpha1.ConditionClusterProvisioned, Status: metav1.ConditionFalse, Reason: operatorv1alpha1.ReasonProvisioning, Message: "creating", LastTransitionTime: metav1.Now()})}
	setStatus(t, cluster)
	sr.Status = controlplanev1alpha1.SubscriptionRequestStatus{Conditions: readyCondition(metav1.ConditionTrue, controlplanev1alpha1.ReasonAssigned, "assigned"),
		GardenerSecretName: "aws-shared-2", ObservedGeneration: sr.Generation}
	setStatus(t, sr)

	out := tp(t, "describe", "cluster", "prod", "-n", ns).ok(t)
	contains(t, out,
		"Cluster "+ns+"/prod Ready=False Provisioning",
		"│ ├─Ready=False Provisioning: Shoot is being created (40%)",
		"├─Shoot c-7654321 (in the Gardener project)",
		"│ └─SubscriptionRequest "+ns+"/prod: Ready=True Assigned, credential aws-shared-2",
		"├─KubeconfigRequests",
		"│ ├─KubeconfigRequest "+ns+"/admin: Ready=Unknown <none>",
		"│ └─KubeconfigRequest "+other+"/tenant: Ready=Unknown <none>",
		"└─Events: none")
	if strings.Contains(out, "elsewhere") {
		t.Errorf("a request of another Cluster is listed:\n%s", out)
	}
	out = tp(t, "describe", "kcr", "tenant", "-n", other).ok(t)
	contains(t, out, "├─Cluster "+ns+"/prod: Ready=False Provisioning, phase Provisioning", "Credential", "kubeconfig tenant -n "+other+" -o FILE")
	out = tp(t, "describe", "subscriptionrequest", "prod", "-n", ns).ok(t)
	contains(t, out, "credential (CredentialsBinding in the Gardener project): aws-shared-2")

	tp(t, "describe", "cluster", "nosuch", "-n", ns).fails(t, `cluster "nosuch" not found in namespace "`+ns+`"`)
}

// TestDescribeJWKSConfigKeyRoles: during a rotation with a signing Secret, describe names
// each published key by its role as the status says: the previous key still signs, the
// new one is next (promoted at pendingPromotionTime), an older one is retiring. None is
// called "current" twice.
func TestDescribeJWKSConfigKeyRoles(t *testing.T) {
	ns := env.Namespace(t, "describe")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", SigningSecret: "issuer-signing", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	now := time.Now()
	day := metav1.NewTime(now.Add(24 * time.Hour))
	cfg.Status = jwksv1alpha1.JWKSConfigStatus{Conditions: readyCondition(metav1.ConditionTrue, jwksv1alpha1.ReasonPublished, "Publishing 3 key(s)"),
		ObservedGeneration: cfg.Generation, LastKeyID: "kid-new", KeyCount: 3, SigningKeyID: "kid-previous",
		PendingKeyID: "kid-new", PendingPromotionTime: &metav1.Time{Time: now.Add(30 * time.Minute)},
		Keys: []jwksv1alpha1.PublishedKey{
			{KeyID: "kid-new", Algorithm: "ES256", NotAfter: &day},
			{KeyID: "kid-previous", Algorithm: "ES256", NotAfter: &day},
			{KeyID: "kid-old", Algorithm: "ES256", NotAfter: &day, RetiredAt: &metav1.Time{Time: now.Add(-2 * time.Hour)}},
		}}
	setStatus(t, cfg)

	out := tp(t, "describe", "jwksconfig", "issuer", "-n", ns).ok(t)
	contains(t, out,
		"├─Published keys",
		"│ ├─kid-new ES256, next: published, promoted to the signing Secret in 29m",
		"│ ├─kid-previous ES256, signing (previous: the signing Secret holds it until the next key is promoted), certificate expires in 23h",
		"│ └─kid-old ES256, retiring: retired 120m ago, kept for the tokens it signed",
		"pending: kid-new")
	if strings.Contains(out, ", current,") {
		t.Errorf("describe calls a key current:\n%s", out)
	}
}
