package jwks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// signingKid is the kid in the signing Secret, "" when there is none.
func signingKid(t *testing.T, ns, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		t.Fatal(err)
	}
	kid, err := jwkset.KeyIDOf(s.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatalf("signing Secret: %v", err)
	}
	return kid
}

// lastWritten is when the controller last wrote the Secret (its managed fields' time, to
// the second).
func lastWritten(t *testing.T, ns, name string) time.Time {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.ManagedFields {
		if f.Manager == FieldOwner && f.Time != nil {
			return f.Time.Time
		}
	}
	t.Fatalf("Secret %s was not written by %s", name, FieldOwner)
	return time.Time{}
}

// watchSigning samples the signing Secret and the published set every few milliseconds
// until stop, and reports the first moment the signing key was not in the published set,
// and when each kid first appeared in the signing Secret.
func watchSigning(t *testing.T, ns, cfgName, secret string) (stop func() (violations []string, promotedAt map[string]time.Time)) {
	t.Helper()
	var violations []string
	promotedAt := map[string]time.Time{}
	stopSampling := sample(10*time.Millisecond, func() {
		kid := signingKid(t, ns, secret)
		cm := &corev1.ConfigMap{}
		if kid == "" || env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cfgName + "-jwks"}, cm) != nil {
			return
		}
		if _, seen := promotedAt[kid]; !seen {
			promotedAt[kid] = time.Now()
		}
		if !strings.Contains(cm.Data[jwkset.DocumentKey], kidField(kid)) {
			violations = append(violations, "signing with "+kid+", which is not in the published set")
		}
	})
	return func() ([]string, map[string]time.Time) {
		stopSampling() // the sampler is done: its results are ours
		return violations, promotedAt
	}
}

// TestSigningSecretIsPromotedOnceServed: the first key is copied to the signing Secret at
// once; a rotated key is published at once and copied only after cacheMaxAge plus the
// margin; a key replaced before its promotion is never promoted, and the key signing
// meanwhile stays in the set; a manager restart during the wait neither promotes early
// nor loses the promotion. The signing key is never one the set does not hold.
func TestSigningSecretIsPromotedOnceServed(t *testing.T) {
	const maxAge, margin = 3 * time.Second, time.Second
	opts := func(o *Options) { o.PromotionMargin = margin }
	mgr := startManager(t, opts)
	ns := newNamespace(t)
	chains := []testcerts.Chain{newChain(t, testcerts.P256), newChain(t, testcerts.P256), newChain(t, testcerts.P256), newChain(t, testcerts.P256)}
	kid := func(i int) string { k, _ := expectedDoc(t, chains[i]); return k }
	putSecret(t, ns, "tls", tlsData(chains[0]))
	newJWKSConfig(t, ns, "idp", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.SigningSecret = "idp-signing"
		c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(maxAge)
		c.Spec.Nginx.Enabled = ptrTo(false)
	})
	waitReady(t, ns, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	testenv.Eventually(t, "the first key promoted at once", 10*time.Second, func() bool { return signingKid(t, ns, "idp-signing") == kid(0) })
	stop := watchSigning(t, ns, "idp", "idp-signing")

	// A rotation: published at once, promoted after maxAge + margin.
	putSecret(t, ns, "tls", tlsData(chains[1]))
	var pendingAt time.Time
	testenv.Eventually(t, "the second key pending", 10*time.Second, func() bool {
		cfg := getConfig(t, ns, "idp")
		if cfg.Status.PendingKeyID == kid(1) && cfg.Status.PendingPromotionTime != nil {
			pendingAt = cfg.Status.PendingPromotionTime.Time
			return cfg.Status.SigningKeyID == kid(0)
		}
		return false
	})
	if got := signingKid(t, ns, "idp-signing"); got != kid(0) {
		t.Fatalf("promoted before its time: %s", got)
	}
	// Replaced again before its promotion: never promoted; the first key keeps signing.
	putSecret(t, ns, "tls", tlsData(chains[2]))
	testenv.Eventually(t, "the third key pending", 10*time.Second, func() bool {
		st := getConfig(t, ns, "idp").Status
		return st.PendingKeyID == kid(2) && st.PendingPromotionTime != nil // the time once every server answers it
	})
	cfg := getConfig(t, ns, "idp")
	pendingAt = cfg.Status.PendingPromotionTime.Time
	// The manager dies during the wait; another takes over.
	mgr.stop()
	startManager(t, opts)
	testenv.Eventually(t, "the third key promoted", 20*time.Second, func() bool { return signingKid(t, ns, "idp-signing") == kid(2) })
	violations, promotedAt := stop()
	for _, v := range violations {
		t.Error(v)
	}
	if _, ok := promotedAt[kid(1)]; ok {
		t.Error("a key replaced before its promotion was promoted")
	}
	if at := lastWritten(t, ns, "idp-signing"); at.Before(pendingAt.Truncate(time.Second)) {
		t.Errorf("promoted at %v, before its promotion time %v", at, pendingAt)
	}
	// The old signing key retires from its promotion on; the never-promoted one before.
	testenv.Eventually(t, "status after the promotion", 10*time.Second, func() bool {
		cfg := getConfig(t, ns, "idp")
		return cfg.Status.SigningKeyID == kid(2) && cfg.Status.PendingKeyID == "" && cfg.Status.PendingPromotionTime == nil
	})
	for _, reason := range []string{jwksv1alpha1.ReasonKeyPublished, jwksv1alpha1.ReasonKeyPromoted} {
		if len(eventsFor(t, ns, "idp", reason)) == 0 {
			t.Errorf("no %s event", reason)
		}
	}

	// immediate: a compromised key stops signing and leaves the set at once.
	updateConfig(t, ns, "idp", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.UpdateStrategy = jwksv1alpha1.UpdateStrategyImmediate })
	waitReady(t, ns, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	putSecret(t, ns, "tls", tlsData(chains[3]))
	testenv.Eventually(t, "promoted at once with immediate", 10*time.Second, func() bool { return signingKid(t, ns, "idp-signing") == kid(3) })
	if doc := getConfigMap(t, ns, "idp-jwks").Data[jwkset.DocumentKey]; strings.Contains(doc, kidField(kid(2))) {
		t.Error("the replaced key stayed in the set with immediate")
	}
}

// TestSigningSecretBadInput: a signingSecret equal to certificateSecret is refused at
// admission; one naming a Secret someone else made is NameInUse and left untouched; a
// missing source Secret never empties the signing Secret.
func TestSigningSecretBadInput(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	same := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "same"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls", SigningSecret: "tls"}}
	if err := env.Client.Create(context.Background(), same); err == nil || !strings.Contains(err.Error(), "spec.signingSecret") {
		t.Errorf("signingSecret = certificateSecret: %v", err)
	}

	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string][]byte{"token": []byte("x")}}
	if err := env.Client.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	newJWKSConfig(t, ns, "grab", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.SigningSecret = "theirs"
		c.Spec.Nginx.Enabled = ptrTo(false)
	})
	waitReady(t, ns, "grab", metav1.ConditionFalse, jwksv1alpha1.ReasonNameInUse)
	got := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(theirs), got); err != nil || got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("someone else's Secret was written: %v", err)
	}

	newJWKSConfig(t, ns, "kept", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.SigningSecret = "kept-signing"
		c.Spec.Nginx.Enabled = ptrTo(false)
	})
	waitReady(t, ns, "kept", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	testenv.Eventually(t, "the signing Secret", 10*time.Second, func() bool { return signingKid(t, ns, "kept-signing") != "" })
	before := signingKid(t, ns, "kept-signing")
	if err := env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "kept", metav1.ConditionFalse, jwksv1alpha1.ReasonSecretNotFound)
	if after := signingKid(t, ns, "kept-signing"); after != before {
		t.Errorf("the signing Secret changed with its source gone: %q → %q", before, after)
	}
}

// TestEventsARelyingPartyNeeds: an EdDSA key published for an issuer gets a Warning event
// (kube-apiserver cannot verify EdDSA); keys removed in one write are named in one
// KeyRemoved event.
func TestEventsARelyingPartyNeeds(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "ed-tls", tlsData(newChain(t, testcerts.Ed25519)))
	newJWKSConfig(t, ns, "ed", "ed-tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.Issuer = "https://" + ns + ".ed.example"
		c.Spec.Nginx.Enabled = ptrTo(false)
	})
	waitReady(t, ns, "ed", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	testenv.Eventually(t, "the EdDSA warning", 10*time.Second, func() bool {
		return len(eventsFor(t, ns, "ed", jwksv1alpha1.ReasonAlgorithmUnsupported)) == 1
	})

	chains := []testcerts.Chain{newChain(t, testcerts.P256), newChain(t, testcerts.P256), newChain(t, testcerts.P256), newChain(t, testcerts.P256)}
	putSecret(t, ns, "tls", tlsData(chains[0]))
	newJWKSConfig(t, ns, "many", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Nginx.Enabled = ptrTo(false) })
	for i := 1; i < 3; i++ {
		waitReady(t, ns, "many", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
		putSecret(t, ns, "tls", tlsData(chains[i]))
		want, _ := expectedDoc(t, chains[i])
		testenv.Eventually(t, "the rotation", 10*time.Second, func() bool { return getConfig(t, ns, "many").Status.LastKeyID == want })
	}
	old0, _ := expectedDoc(t, chains[0])
	old1, _ := expectedDoc(t, chains[1])
	// immediate: both retired keys leave in one write.
	updateConfig(t, ns, "many", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.UpdateStrategy = jwksv1alpha1.UpdateStrategyImmediate })
	testenv.Eventually(t, "one KeyRemoved naming both keys", 10*time.Second, func() bool {
		events := eventsFor(t, ns, "many", "KeyRemoved")
		return len(events) == 1 && strings.Contains(events[0].Note, old0) && strings.Contains(events[0].Note, old1)
	})
}

// kidField is a key's kid as go-jose writes it in a document.
func kidField(kid string) string { return `"kid":"` + kid + `"` }

// The pending promotion time is never earlier than cacheMaxAge + margin after the moment
// the set is known served, even read back from status, which keeps whole seconds.
// test/chaos found keys promoted about a second early: the time was counted from the
// reconcile's start, rounded down to the second, before the set was written and served.
func TestPendingPromotionTimeIsNeverEarly(t *testing.T) {
	const maxAge, margin = 10 * time.Second, 2 * time.Second
	served := time.Date(2030, 1, 1, 12, 0, 0, 900_000_000, time.UTC)
	r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(served), PromotionMargin: margin, Recorder: events.NewFakeRecorder(10)}
	cfg := &jwksv1alpha1.JWKSConfig{Spec: jwksv1alpha1.JWKSConfigSpec{SigningSecret: "s", CacheMaxAge: jwksv1alpha1.DurationOf(maxAge)}}
	// The reconcile began in the second before (its now, to the second).
	wait, err := r.promoteKey(context.Background(), cfg, "new", "old", false, served.Truncate(time.Second), publication{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cfg.Status.PendingPromotionTime)
	if err != nil {
		t.Fatal(err)
	}
	var stored metav1.Time
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if due := served.Add(maxAge + margin); stored.Time.Before(due) || served.Truncate(time.Second).Add(wait).Before(due) {
		t.Errorf("promotion at %v (stored %v, wait %v): earlier than cacheMaxAge + margin after the set was served, %v", cfg.Status.PendingPromotionTime, stored, wait, due)
	}
}
