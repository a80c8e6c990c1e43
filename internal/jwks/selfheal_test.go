package jwks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// rotate puts a new certificate into the Secret and waits until its key is the current one.
func rotate(t *testing.T, ns, secret, config string) string {
	t.Helper()
	c := newChain(t, testcerts.P256)
	kid, _ := expectedDoc(t, c)
	putSecret(t, ns, secret, tlsData(c))
	testenv.Eventually(t, "key "+kid+" to be current", 30*time.Second, func() bool {
		cfg := getConfig(t, ns, config)
		r := readyCondition(cfg)
		return cfg.Status.LastKeyID == kid && r != nil && r.Status == metav1.ConditionTrue
	})
	return kid
}

// TestMaxKeysBoundsTheSet: five rotations under maxKeys 3 leave the current key and the
// two retired last, whatever oldKeysTTL says.
func TestMaxKeysBoundsTheSet(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "capped", "tls", withoutNginx)
	waitReady(t, ns, "capped", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if got := getConfig(t, ns, "capped").Spec.MaxKeys; got == nil || *got != 3 {
		t.Fatalf("maxKeys defaults to %v, want 3", got)
	}
	var kids []string
	for range 5 {
		kids = append(kids, rotate(t, ns, "tls", "capped"))
	}
	cfg := getConfig(t, ns, "capped")
	var got []string
	for _, k := range cfg.Status.Keys {
		got = append(got, k.KeyID)
	}
	if want := []string{kids[4], kids[3], kids[2]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("kept %v, want the current key and the two retired last %v", got, want)
	}
	doc := getConfigMap(t, ns, "capped-jwks").Data[jwkset.DocumentKey]
	if keys, err := jwkset.Unmarshal([]byte(doc)); err != nil || len(keys) != 3 {
		t.Errorf("published set: %d keys, %v", len(keys), err)
	}
	waitEvent(t, ns, "capped", "KeyRemoved")
}

// TestInvalidFieldsAreRefusedWithAnExample: admission names the field and shows a valid value.
func TestInvalidFieldsAreRefusedWithAnExample(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name   string
		mutate func(*jwksv1alpha1.JWKSConfig)
		want   string
	}{
		{"same ConfigMap twice", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.ConfigMapName, c.Spec.NginxConfigMapName = "keys", "keys" },
			"spec.configMapName: Invalid value: spec.configMapName and spec.nginxConfigMapName must name different ConfigMaps"},
		{"the default nginx name", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.ConfigMapName = "names-nginx" },
			"such as issuer-jwks and issuer-nginx"},
		{"not a DNS name", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.ConfigMapName = "Keys_1" },
			`spec.configMapName: Invalid value: "Keys_1": must be a ConfigMap name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-jwks`},
		{"nginx not a DNS name", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.NginxConfigMapName = "-x" },
			`spec.nginxConfigMapName: Invalid value: "-x": must be a ConfigMap name`},
		{"secret not a DNS name", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.CertificateSecret = "a b" },
			`spec.certificateSecret: Invalid value: "a b": must be a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.'), such as issuer-tls`},
		{"maxKeys zero", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.MaxKeys = ptr.To[int32](0) },
			"spec.maxKeys: Invalid value: 0: must be from 1 to 20 (the current key and up to 19 retired ones), such as 3"},
		{"maxKeys too many", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.MaxKeys = ptr.To[int32](21) },
			"spec.maxKeys: Invalid value: 21: must be from 1 to 20"},
		{"issuer with a query", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Issuer = "https://idp.example/?tenant=a" },
			`spec.issuer: Invalid value: "https://idp.example/?tenant=a": must be an https URL with a host and no user, query or fragment, such as https://idp.example or https://idp.example/tenants/a`},
		{"issuer over http", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Issuer = "http://idp.example" },
			`spec.issuer: Invalid value: "http://idp.example": must be an https URL`},
		{"endpoint relative", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Endpoint = "jwks.json" },
			`spec.endpoint: Invalid value: "jwks.json": must be an absolute path such as /jwks.json`},
	} {
		cfg := &jwksv1alpha1.JWKSConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "names"},
			Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"},
		}
		tc.mutate(cfg)
		err := env.Client.Create(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestTwoConfigsNamingOneConfigMap: the second stalls and the first's set is untouched;
// once the first is gone, the second takes the name at once (no resync needed).
func TestTwoConfigsNamingOneConfigMap(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls-a", tlsData(newChain(t, testcerts.P256)))
	putSecret(t, ns, "tls-b", tlsData(newChain(t, testcerts.P384)))
	first := newJWKSConfig(t, ns, "first", "tls-a", withoutNginx, func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.ConfigMapName = "shared"
		c.Spec.CleanupOnDelete = true
	})
	waitReady(t, ns, "first", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	before := getConfigMap(t, ns, "shared")

	newJWKSConfig(t, ns, "second", "tls-b", withoutNginx, func(c *jwksv1alpha1.JWKSConfig) { c.Spec.ConfigMapName = "shared" })
	cfg := waitReadyMessage(t, ns, "second", metav1.ConditionFalse, jwksv1alpha1.ReasonNameInUse, `ConfigMap "shared" already exists and belongs to JWKSConfig "first"`)
	if c := condition(cfg, "Stalled"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v", c)
	}
	if after := getConfigMap(t, ns, "shared"); after.ResourceVersion != before.ResourceVersion {
		t.Error("the first JWKSConfig's set was written by the second")
	}

	if err := env.Client.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "second", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if owner := getConfigMap(t, ns, "shared").Labels[jwksv1alpha1.OwnerLabel]; owner != "second" {
		t.Errorf("ConfigMap owner label = %q", owner)
	}
}

// TestNginxObjectsOfSomeoneElseAreLeftAlone: a Deployment of the JWKSConfig's name that
// trustplane did not make is never overwritten.
func TestNginxObjectsOfSomeoneElseAreLeftAlone(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	if err := env.Client.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "theirs", "tls")
	waitReadyMessage(t, ns, "theirs", metav1.ConditionFalse, jwksv1alpha1.ReasonNameInUse, `Service "theirs" already exists and was not made by trustplane`)
	got := &corev1.Service{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(svc), got); err != nil || got.ResourceVersion != svc.ResourceVersion {
		t.Errorf("someone else's Service was written: %v", err)
	}
}

// TestRenamingTheConfigMapMovesTheSet: the set, retired keys and their retirement times
// included, moves to the new name; the old ConfigMap goes; nginx follows.
func TestRenamingTheConfigMapMovesTheSet(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "moving", "tls")
	waitReady(t, ns, "moving", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	rotate(t, ns, "tls", "moving")
	old := getConfigMap(t, ns, "moving-jwks")

	updateConfig(t, ns, "moving", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.ConfigMapName = "moved-keys" })
	waitReady(t, ns, "moving", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	moved := getConfigMap(t, ns, "moved-keys")
	if moved.Data[jwkset.DocumentKey] != old.Data[jwkset.DocumentKey] || moved.Annotations[jwksv1alpha1.RetirementsAnnotation] != old.Annotations[jwksv1alpha1.RetirementsAnnotation] {
		t.Errorf("the set did not move as it was:\nold %v %s\nnew %v %s", old.Annotations, old.Data[jwkset.DocumentKey], moved.Annotations, moved.Data[jwkset.DocumentKey])
	}
	testenv.Eventually(t, "the old ConfigMap to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(old), &corev1.ConfigMap{}))
	})
	deploy := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "moving"}, deploy); err != nil {
		t.Fatal(err)
	}
	if name := deploy.Spec.Template.Spec.Volumes[1].ConfigMap.Name; name != "moved-keys" {
		t.Errorf("nginx mounts %q", name)
	}
	waitEvent(t, ns, "moving", "ConfigMapMoved")
}

// editAs changes obj as another field manager would with kubectl edit (an update).
func editAs(t *testing.T, obj client.Object, edit func()) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	edit()
	if err := env.Client.Update(context.Background(), obj, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

// TestEditsByOthersAreReverted: changes to the fields the controller owns, in each object
// it writes, are put back; a key slipped into the published set is never published.
func TestEditsByOthersAreReverted(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	ctx := context.Background()
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "kept", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Issuer = "https://" + ns + ".idp.example/kept" })
	cfg := waitReady(t, ns, "kept", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

	nginxCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept-nginx"}}
	want := getConfigMap(t, ns, "kept-nginx").Data[nginxConfigKey]
	editAs(t, nginxCM, func() { nginxCM.Data[nginxConfigKey] = "server { listen 8080; return 200 'owned'; }" })
	testenv.Eventually(t, "the nginx configuration to be put back", 30*time.Second, func() bool {
		return getConfigMap(t, ns, "kept-nginx").Data[nginxConfigKey] == want
	})

	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	editAs(t, deploy, func() {
		deploy.Spec.Replicas = ptr.To[int32](7)
		deploy.Spec.Template.Spec.Containers[0].Image = "attacker/nginx"
	})
	testenv.Eventually(t, "the Deployment to be put back", 30*time.Second, func() bool {
		d := &appsv1.Deployment{}
		return env.Client.Get(ctx, key("kept"), d) == nil && *d.Spec.Replicas == 2 &&
			d.Spec.Template.Spec.Containers[0].Image == DefaultNginxImage
	})

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	editAs(t, svc, func() { svc.Spec.Selector = map[string]string{"app": "elsewhere"} })
	testenv.Eventually(t, "the Service to be put back", 30*time.Second, func() bool {
		s := &corev1.Service{}
		return env.Client.Get(ctx, key("kept"), s) == nil && s.Spec.Selector[jwksv1alpha1.OwnerLabel] == "kept" && s.Spec.Selector["app"] == ""
	})

	slipKeyIn(t, cfg)
}

// slipKeyIn adds a key to the set cfg publishes, as someone else, and checks it is put
// back without that key, which is never published.
func slipKeyIn(t *testing.T, cfg *jwksv1alpha1.JWKSConfig) {
	t.Helper()
	ns, name := cfg.Namespace, jwkset.ConfigMapName(cfg)
	set := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	published := getConfigMap(t, ns, name).Data[jwkset.DocumentKey]
	rogueKid, rogueDoc := expectedDoc(t, newChain(t, testcerts.P256))
	editAs(t, set, func() { set.Data[jwkset.DocumentKey] = withKey(t, published, rogueDoc) })
	testenv.Eventually(t, "the published set to be put back", 30*time.Second, func() bool {
		return getConfigMap(t, ns, name).Data[jwkset.DocumentKey] == published
	})
	if strings.Contains(getConfigMap(t, ns, name).Data[jwkset.DocumentKey], rogueKid) {
		t.Error("a key slipped into the ConfigMap was published")
	}
	if got := getConfig(t, ns, cfg.Name); got.Status.KeyCount != cfg.Status.KeyCount {
		t.Errorf("key count %d, was %d", got.Status.KeyCount, cfg.Status.KeyCount)
	}
}

// withKey is the set doc with the single key of other appended.
func withKey(t *testing.T, doc string, other []byte) string {
	t.Helper()
	var a, b struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(doc), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(other, &b); err != nil {
		t.Fatal(err)
	}
	a.Keys = append(a.Keys, b.Keys...)
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestConfigChangesRollNginx: nginx reads its configuration only at start, so a change to
// it (cacheMaxAge, an issuer) changes the pod template.
func TestConfigChangesRollNginx(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "rolling", "tls")
	waitReady(t, ns, "rolling", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	templateHash := func() string {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rolling"}, d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations[jwksv1alpha1.ConfigHashAnnotation]
	}
	before := templateHash()
	if before == "" {
		t.Fatal("no configuration hash on the pod template")
	}
	for i, change := range []func(*jwksv1alpha1.JWKSConfig){
		func(c *jwksv1alpha1.JWKSConfig) { c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(time.Minute) },
		func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Issuer = "https://" + ns + ".idp.example" },
	} {
		updateConfig(t, ns, "rolling", change)
		waitReady(t, ns, "rolling", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
		after := templateHash()
		if after == before {
			t.Errorf("change %d did not change the pod template", i)
		}
		before = after
	}
	if !strings.Contains(getConfigMap(t, ns, "rolling-nginx").Data[nginxConfigKey], "max-age=60") {
		t.Error("the nginx configuration does not have the new cacheMaxAge")
	}
	set := getConfigMap(t, ns, "rolling-jwks")
	if !strings.Contains(set.Data[jwkset.DiscoveryKey], `"jwks_uri":"https://`+ns+`.idp.example/jwks.json"`) {
		t.Errorf("no discovery document beside the set: %v", set.Data)
	}
}

// TestReadyMeansServed: Ready waits for the nginx Deployment to have every replica
// updated and available, and says how many are.
func TestReadyMeansServed(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	ctx := context.Background()
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[testenv.NoRolloutLabel] = "true"
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "served", "tls")
	waitReadyMessage(t, ns, "served", metav1.ConditionFalse, jwksv1alpha1.ReasonNginxUnavailable, `nginx Deployment "served" has 0 of 2 replicas updated and available`)
	cfg := getConfig(t, ns, "served")
	if c := condition(cfg, "Reconciling"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != jwksv1alpha1.ReasonNginxUnavailable {
		t.Errorf("Reconciling = %+v", c)
	}

	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "served"}, d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := env.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitReadyMessage(t, ns, "served", metav1.ConditionFalse, jwksv1alpha1.ReasonNginxUnavailable, "has 1 of 2")
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 2, 2
	if err := env.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "served", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
}

// unseenConfigMaps is a cache that has not seen any ConfigMap yet.
type unseenConfigMaps struct{ client.Reader }

func (u unseenConfigMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
	}
	return u.Reader.Get(ctx, key, obj, opts...)
}

// TestNotReadyUntilTheServerAnswersTheSet: the server answers from the controller's
// cache; until that cache holds the written set, the JWKSConfig is Reconciling.
func TestNotReadyUntilTheServerAnswersTheSet(t *testing.T) {
	d := newDirectReconciler(t, 0)
	d.Owned = unseenConfigMaps{Reader: d.Owned}
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "unseen", "tls", withoutNginx)
	_, _ = d.reconcile(t, ns, "unseen")
	cfg := getConfig(t, ns, "unseen")
	if r := readyCondition(cfg); r == nil || r.Status != metav1.ConditionFalse || r.Reason != jwksv1alpha1.ReasonServerSyncing {
		t.Errorf("Ready = %+v, want False %s", r, jwksv1alpha1.ReasonServerSyncing)
	}
	if cfg.Status.KeyCount != 1 || getConfigMap(t, ns, "unseen-jwks").Data[jwkset.DocumentKey] == "" {
		t.Errorf("the set was not written: %+v", cfg.Status)
	}
}

// TestKeySlippedIntoACreatedSetIsNeverPublished: a set without an issuer is made with a
// plain create (createsFirst), so its fields are the controller's under the Update
// operation until its first apply; a key slipped in then is still put back, never
// published, and the set is applied from then on.
func TestKeySlippedIntoACreatedSetIsNeverPublished(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "created", "tls")
	cfg := waitReady(t, ns, "created", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	created := getConfigMap(t, ns, "created-jwks")
	if len(created.ManagedFields) != 1 || created.ManagedFields[0].Manager != FieldOwner || created.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("managed fields %+v: want the set made by a plain create of %s", created.ManagedFields, FieldOwner)
	}
	slipKeyIn(t, cfg)
}
