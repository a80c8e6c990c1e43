package jwks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// expectedDoc is what the published document must be for a single current key.
func expectedDoc(t testing.TB, c testcerts.Chain) (string, []byte) {
	t.Helper()
	key, err := jwkset.ParseChain(c.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	return key.KeyID(), doc
}

func TestEveryKeyTypeIsPublishedWithStatus(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	for _, kt := range []testcerts.KeyType{testcerts.RSA2048, testcerts.RSA3072, testcerts.RSA4096, testcerts.P256, testcerts.P384, testcerts.P521, testcerts.Ed25519} {
		name := strings.ToLower(string(kt))
		chain := newChain(t, kt)
		putSecret(t, ns, name+"-tls", tlsData(chain))
		newJWKSConfig(t, ns, name, name+"-tls")
		kid, doc := expectedDoc(t, chain)
		cfg := waitReady(t, ns, name, metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
		if got := getConfigMap(t, ns, name+"-jwks").Data[jwkset.DocumentKey]; got != string(doc) {
			t.Errorf("%s: published document differs from the expected one", kt)
		}
		if cfg.Status.LastKeyID != kid || cfg.Status.KeyCount != 1 || len(cfg.Status.Keys) != 1 {
			t.Errorf("%s: status %+v", kt, cfg.Status)
		}
		if cfg.Status.LastUpdateTime == nil || cfg.Status.NginxConfigUpdated == nil || cfg.Status.ObservedGeneration != cfg.Generation {
			t.Errorf("%s: status times/generation missing: %+v", kt, cfg.Status)
		}
		if k := cfg.Status.Keys[0]; k.KeyID != kid || k.NotAfter == nil || !k.NotAfter.Time.Equal(chain.Leaf.NotAfter) || k.RetiredAt != nil {
			t.Errorf("%s: key status %+v", kt, k)
		}
		if !strings.Contains(readyCondition(cfg).Message, kid) {
			t.Errorf("%s: Ready message %q lacks the kid", kt, readyCondition(cfg).Message)
		}
	}
}

// A JWKSConfig with nothing to clean up on deletion (nginx off, no issuer, the set kept)
// gets no finalizer, and its first publication no event (the Ready condition says it):
// serving it costs only the writes it needs. One that has work on deletion gets the
// finalizer before anything is made (TestDeletion).
func TestNothingToCleanUpCostsNoFinalizerOrEvent(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	cfg := newJWKSConfig(t, ns, "light", "tls", withoutNginx)
	waitReady(t, ns, "light", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if got := getConfig(t, ns, "light"); len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v: deleting it has nothing to do", got.Finalizers)
	}
	// A rotation is news: once its event is there, the first publication's would be too.
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	waitEvent(t, ns, "light", jwksv1alpha1.ReasonKeyRotated)
	if got := eventsFor(t, ns, "light", jwksv1alpha1.ReasonPublished); len(got) > 0 {
		t.Errorf("an event for the first publication: %v", got)
	}
	if err := env.Client.Delete(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the JWKSConfig to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), &jwksv1alpha1.JWKSConfig{}))
	})
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "light-jwks"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the published set went with it (cleanupOnDelete is false): %v", err)
	}
}

// TestSecretChangeReachesConfigMapThroughTheWatch: a rotation is published without any
// change to the JWKSConfig, and with no periodic resync (the next planned wake-up is
// the certificate's expiry, months away).
func TestSecretChangeReachesConfigMapThroughTheWatch(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	first, second := newChain(t, testcerts.P256), newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "watch", "tls")
	kid1, _ := expectedDoc(t, first)
	waitReady(t, ns, "watch", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)

	putSecret(t, ns, "tls", tlsData(second))
	kid2, _ := expectedDoc(t, second)
	testenv.Eventually(t, "the new key in the ConfigMap", 30*time.Second, func() bool {
		return strings.Contains(getConfigMap(t, ns, "watch-jwks").Data[jwkset.DocumentKey], kid2)
	})
	doc := getConfigMap(t, ns, "watch-jwks").Data[jwkset.DocumentKey]
	if strings.Index(doc, kid2) > strings.Index(doc, kid1) {
		t.Error("the new key is not first")
	}
	// The status is patched after the ConfigMap is applied, in the same reconcile.
	testenv.Eventually(t, "the status to record the rotation", 30*time.Second, func() bool {
		st := getConfig(t, ns, "watch").Status
		return st.KeyCount == 2 && len(st.Keys) == 2 && st.Keys[1].RetiredAt != nil
	})
	waitEvent(t, ns, "watch", "KeyRotated")
}

// TestRetiredKeyIsRemovedOnTimeAndSurvivesRestart: rolling + keepOldKeys keeps the old
// key for oldKeysTTL after its retirement, across a manager restart, then removes it
// with no other change.
func TestRetiredKeyIsRemovedOnTimeAndSurvivesRestart(t *testing.T) {
	mgr := startManager(t)
	ns := newNamespace(t)
	first, second := newChain(t, testcerts.P256), newChain(t, testcerts.Ed25519)
	putSecret(t, ns, "tls", tlsData(first))
	ttl := 6 * time.Second
	newJWKSConfig(t, ns, "ttl", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.OldKeysTTL = jwksv1alpha1.DurationOf(ttl)
	})
	waitReady(t, ns, "ttl", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	kid1, _ := expectedDoc(t, first)
	kid2, _ := expectedDoc(t, second)
	putSecret(t, ns, "tls", tlsData(second))
	testenv.Eventually(t, "two keys", 30*time.Second, func() bool { return getConfig(t, ns, "ttl").Status.KeyCount == 2 })
	retiredAt := getConfigMap(t, ns, "ttl-jwks").Annotations[jwksv1alpha1.RetirementsAnnotation]
	if !strings.Contains(retiredAt, kid1) {
		t.Fatalf("retirement record %q lacks the old kid", retiredAt)
	}

	mgr.stop()
	startManager(t)
	// The restarted manager reconciles everything at start; the record must not move.
	time.Sleep(time.Second)
	if got := getConfigMap(t, ns, "ttl-jwks").Annotations[jwksv1alpha1.RetirementsAnnotation]; got != retiredAt {
		t.Fatalf("restart changed the retirement record: %q → %q", retiredAt, got)
	}
	testenv.Eventually(t, "the retired key to be removed", 30*time.Second, func() bool { return getConfig(t, ns, "ttl").Status.KeyCount == 1 })
	doc := getConfigMap(t, ns, "ttl-jwks").Data[jwkset.DocumentKey]
	if strings.Contains(doc, kid1) || !strings.Contains(doc, kid2) {
		t.Errorf("after the TTL the set should hold only the new key")
	}
	waitEvent(t, ns, "ttl", "KeyRemoved")
}

func TestReplacingStrategies(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	for name, mutate := range map[string]func(*jwksv1alpha1.JWKSConfig){
		"immediate":       func(c *jwksv1alpha1.JWKSConfig) { c.Spec.UpdateStrategy = jwksv1alpha1.UpdateStrategyImmediate },
		"rolling-no-keep": func(c *jwksv1alpha1.JWKSConfig) { c.Spec.KeepOldKeys = boolPtr(false) },
	} {
		first, second := newChain(t, testcerts.P256), newChain(t, testcerts.P256)
		putSecret(t, ns, name, tlsData(first))
		newJWKSConfig(t, ns, name, name, mutate)
		waitReady(t, ns, name, metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
		putSecret(t, ns, name, tlsData(second))
		_, want := expectedDoc(t, second)
		testenv.Eventually(t, name+": the set replaced by the new key", 30*time.Second, func() bool {
			return getConfigMap(t, ns, name+"-jwks").Data[jwkset.DocumentKey] == string(want)
		})
	}
}

func TestRenewedCertificateWithSameKeyKeepsKid(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	first := newChain(t, testcerts.RSA2048)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "renew", "tls")
	cfg := waitReady(t, ns, "renew", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	kid := cfg.Status.LastKeyID

	renewed := renew(t, first)
	putSecret(t, ns, "tls", tlsData(renewed))
	_, want := expectedDoc(t, renewed)
	testenv.Eventually(t, "x5c/x5t updated in place", 30*time.Second, func() bool {
		return getConfigMap(t, ns, "renew-jwks").Data[jwkset.DocumentKey] == string(want)
	})
	cfg = getConfig(t, ns, "renew")
	if cfg.Status.LastKeyID != kid || cfg.Status.KeyCount != 1 {
		t.Errorf("renewal changed kid or count: %+v", cfg.Status)
	}
}

// TestBadInputKeepsThePublishedSet: each bad input gives Ready=False with a precise
// reason, an event, and leaves the ConfigMap untouched; fixing the Secret recovers.
func TestBadInputKeepsThePublishedSet(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	good := newChain(t, testcerts.P256)
	weak := newChain(t, testcerts.RSA1024)
	expiredKey, _ := testcerts.NewKey(testcerts.P256)
	expired, err := testcerts.NewChain(expiredKey, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	testdata := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal/jwks/jwkset/testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	putSecret(t, ns, "tls", tlsData(good))
	newJWKSConfig(t, ns, "bad", "tls")
	waitReady(t, ns, "bad", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	published := getConfigMap(t, ns, "bad-jwks")

	for _, tc := range []struct {
		name, reason, message string
		data                  map[string][]byte
	}{
		{"no tls.crt", jwksv1alpha1.ReasonMissingCertificate, `Secret "tls" has no tls.crt`, map[string][]byte{"tls.key": good.KeyPEM()}},
		{"garbage", jwksv1alpha1.ReasonInvalidPEM, "no PEM block", map[string][]byte{"tls.crt": []byte("garbage")}},
		{"non-certificate block", jwksv1alpha1.ReasonNotACertificate, `"PRIVATE KEY" PEM block`, map[string][]byte{"tls.crt": good.KeyPEM()}},
		{"DSA", jwksv1alpha1.ReasonUnsupportedKey, "DSA is not supported", map[string][]byte{"tls.crt": testdata("dsa.crt")}},
		{"Ed448", jwksv1alpha1.ReasonUnsupportedKey, "Ed448 is not supported", map[string][]byte{"tls.crt": testdata("ed448.crt")}},
		{"RSA 1024", jwksv1alpha1.ReasonWeakKey, "1024 bits", tlsData(weak)},
		{"expired", jwksv1alpha1.ReasonCertificateExpired, "expired at", tlsData(expired)},
		{"oversized", jwksv1alpha1.ReasonCertificateTooLarge, "more than the 65536",
			map[string][]byte{"tls.crt": append(good.PEM(), bytes.Repeat([]byte("\n"), jwkset.MaxCertificateBytes)...)}},
	} {
		putSecret(t, ns, "tls", tc.data)
		cfg := waitReadyMessage(t, ns, "bad", metav1.ConditionFalse, tc.reason, tc.message)
		if msg := readyCondition(cfg).Message; strings.Contains(msg, "BEGIN") {
			t.Errorf("%s: message %q", tc.name, msg)
		}
		waitEvent(t, ns, "bad", tc.reason)
		if now := getConfigMap(t, ns, "bad-jwks"); now.ResourceVersion != published.ResourceVersion {
			t.Errorf("%s: the published ConfigMap was written", tc.name)
		}
		if cfg.Status.KeyCount != 1 {
			t.Errorf("%s: status lost the published key", tc.name)
		}
	}
	// Fixing the Secret recovers without touching the JWKSConfig.
	generation := getConfig(t, ns, "bad").Generation
	putSecret(t, ns, "tls", tlsData(good))
	cfg := waitReady(t, ns, "bad", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if cfg.Generation != generation {
		t.Error("the JWKSConfig was changed")
	}
}

func TestMissingSecretWaitsForIt(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	newJWKSConfig(t, ns, "later", "not-yet")
	cfg := waitReady(t, ns, "later", metav1.ConditionFalse, jwksv1alpha1.ReasonSecretNotFound)
	if !strings.Contains(readyCondition(cfg).Message, `"not-yet"`) {
		t.Errorf("message %q", readyCondition(cfg).Message)
	}
	waitEvent(t, ns, "later", jwksv1alpha1.ReasonSecretNotFound)
	putSecret(t, ns, "not-yet", tlsData(newChain(t, testcerts.P384)))
	waitReady(t, ns, "later", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
}

// TestCorruptPublishedSetIsNotOverwritten: never drop keys we cannot read.
func TestCorruptPublishedSetIsNotOverwritten(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corrupt-jwks", Labels: map[string]string{jwksv1alpha1.OwnerLabel: "corrupt"}},
		Data: map[string]string{jwkset.DocumentKey: `{"keys":[{"kty":"RSA"`}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "corrupt", "tls")
	waitReady(t, ns, "corrupt", metav1.ConditionFalse, jwksv1alpha1.ReasonInvalidPublished)
	if got := getConfigMap(t, ns, "corrupt-jwks").Data[jwkset.DocumentKey]; got != cm.Data[jwkset.DocumentKey] {
		t.Error("the unreadable set was overwritten")
	}
}

// TestAnExistingSetIsTakenOnlyWhenHandedOver: a ConfigMap someone else made is never
// adopted or touched (NameInUse); labelled over to the JWKSConfig (moving from another
// operator), it is taken with its keys.
func TestAnExistingSetIsTakenOnlyWhenHandedOver(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	old := newChain(t, testcerts.RSA2048)
	oldKid, oldDoc := expectedDoc(t, old)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopt-jwks"}, Data: map[string]string{jwkset.DocumentKey: string(oldDoc)}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "adopt", "tls")
	waitReadyMessage(t, ns, "adopt", metav1.ConditionFalse, jwksv1alpha1.ReasonNameInUse, `ConfigMap "adopt-jwks" already exists and was not made by trustplane`)
	if got := getConfigMap(t, ns, "adopt-jwks"); got.ResourceVersion != cm.ResourceVersion {
		t.Fatal("a ConfigMap trustplane did not make was written")
	}

	cm.Labels = map[string]string{jwksv1alpha1.OwnerLabel: "adopt"}
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	cfg := waitReady(t, ns, "adopt", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if cfg.Status.KeyCount != 2 || cfg.Status.Keys[1].KeyID != oldKid {
		t.Errorf("the handed-over set lost the old key: %+v", cfg.Status.Keys)
	}
}

func TestNginxObjectsAndPodRefresh(t *testing.T) {
	m := startManager(t)
	ns := newNamespace(t)
	ctx := context.Background()
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "web", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.Nginx.Resources = jwksv1alpha1.NginxResources{Requests: map[corev1.ResourceName]jwksv1alpha1.Quantity{corev1.ResourceCPU: "25m", corev1.ResourceMemory: "32Mi"}}
	})
	waitReady(t, ns, "web", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)

	deploy := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, deploy); err != nil {
		t.Fatal(err)
	}
	c := deploy.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().String() != "25m" || c.Resources.Requests.Memory().String() != "32Mi" {
		t.Errorf("resources not from the spec: %v", c.Resources)
	}
	if *deploy.Spec.Replicas != 2 || deploy.Spec.Template.Spec.Volumes[1].ConfigMap.Name != "web-jwks" {
		t.Errorf("deployment: %+v", deploy.Spec)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector[jwksv1alpha1.OwnerLabel] != "web" {
		t.Errorf("service: %+v", svc.Spec)
	}
	nginxCM := getConfigMap(t, ns, "web-nginx")
	if !strings.Contains(nginxCM.Data["default.conf"], "try_files /jwks.json") {
		t.Errorf("nginx config: %s", nginxCM.Data["default.conf"])
	}

	// A running nginx pod (no kubelet here: the object stands for it) gets its content
	// annotation bumped when the set changes, so its kubelet refreshes the volume now.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-pod", Labels: podLabels(&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "web"}})},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The controller finds pods in its cache when the set changes; it does not watch them.
	testenv.Eventually(t, "the pod in the controller's cache", 10*time.Second, func() bool {
		return m.reconciler.Owned.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) == nil
	})
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	testenv.Eventually(t, "pod content annotation", 30*time.Second, func() bool {
		got := &corev1.Pod{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return got.Annotations[jwksv1alpha1.PodContentAnnotation] == hashOf(getConfigMap(t, ns, "web-jwks").Data)
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, deploy); err != nil {
		t.Fatal(err)
	}
	if _, ok := deploy.Spec.Template.Annotations[jwksv1alpha1.PodContentAnnotation]; ok {
		t.Error("the pod template changed: that would restart nginx")
	}

	// Someone deletes the Deployment: it comes back through the owned-object watch.
	if err := env.Client.Delete(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Deployment to be recreated", 30*time.Second, func() bool {
		d := &appsv1.Deployment{}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d) == nil && d.UID != deploy.UID
	})
}

func TestDeletion(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	for _, cleanup := range []bool{false, true} {
		ns := newNamespace(t)
		putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
		cfg := newJWKSConfig(t, ns, "gone", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.CleanupOnDelete = cleanup })
		waitReady(t, ns, "gone", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
		if got := getConfig(t, ns, "gone"); len(got.Finalizers) != 1 || got.Finalizers[0] != Finalizer.Name {
			t.Fatalf("finalizers = %v", got.Finalizers)
		}
		if err := env.Client.Delete(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the JWKSConfig to go", 30*time.Second, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), &jwksv1alpha1.JWKSConfig{}))
		})
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, obj); !apierrors.IsNotFound(err) {
				t.Errorf("cleanup=%v: %T still there (%v)", cleanup, obj, err)
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone-nginx"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("cleanup=%v: nginx ConfigMap still there", cleanup)
		}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone-jwks"}, &corev1.ConfigMap{})
		if cleanup != apierrors.IsNotFound(err) {
			t.Errorf("cleanupOnDelete=%v but JWKS ConfigMap get = %v", cleanup, err)
		}
	}
}

func TestPrinterColumns(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "jwksconfigs.jwks.trustplane.io"}, crd); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "Ready,Key ID,Keys,Signing,Pending,Promotion,Reason,Age" {
		t.Errorf("printer columns = %s", got)
	}
}

func TestNameValidation(t *testing.T) {
	ns := newNamespace(t)
	cfg := &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("a", 60)},
		Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "x"},
	}
	err := env.Client.Create(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "at most 57 characters") {
		t.Errorf("long name: %v", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("name must be a DNS label")) {
		t.Errorf("message: %v", err)
	}
}

// TestPromotionColumnWhilePending: while a promotion is pending (pendingPromotionTime in
// the future), `kubectl get jwksconfig -o wide` shows when it happens. A date column would
// print <invalid> for a time to come (kubectl's, and the API server's Table, humanise a
// date as its age); the table is read as kubectl reads it, from the API server.
func TestPromotionColumnWhilePending(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cfg := newJWKSConfig(t, ns, "pending", "tls", withoutNginx)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	cfg.Status.PendingKeyID = "next-kid"
	cfg.Status.PendingPromotionTime = &metav1.Time{Time: at}
	if err := env.Client.Status().Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(env.Config.Host, "/") + "/apis/" + jwksv1alpha1.GroupVersion.String() + "/namespaces/" + ns + "/jwksconfigs/pending"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	table := &metav1.Table{}
	if err := json.NewDecoder(resp.Body).Decode(table); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the Table of the JWKSConfig: %d %v", resp.StatusCode, err)
	}
	column := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Promotion" })
	if column < 0 || len(table.Rows) != 1 || len(table.Rows[0].Cells) <= column {
		t.Fatalf("no Promotion cell: columns %+v, rows %+v", table.ColumnDefinitions, table.Rows)
	}
	if got, want := fmt.Sprint(table.Rows[0].Cells[column]), at.Format(time.RFC3339); got != want {
		t.Errorf("Promotion column while a promotion is pending = %q, want %q (when the key is promoted)", got, want)
	}
}
