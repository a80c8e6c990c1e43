package jwks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

const policyMessage = "test policy: JWK Sets are not published in this namespace"

// denyJWKSConfigMaps makes a ValidatingAdmissionPolicy deny every ConfigMap named
// *-jwks in ns, and returns a function that lifts it.
func denyJWKSConfigMaps(t *testing.T, ns string) (lift func()) {
	t.Helper()
	name := "deny-jwks-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!object.metadata.name.endsWith('-jwks')", Message: policyMessage}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		}}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	probe := func() error {
		return env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe-jwks"}}, client.DryRunAll)
	}
	testenv.Eventually(t, "the policy in force", 30*time.Second, func() bool { return probe() != nil })
	lift = func() {
		for _, obj := range []client.Object{binding, policy} {
			_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), obj))
		}
		testenv.Eventually(t, "the policy lifted", 30*time.Second, func() bool { return probe() == nil })
	}
	t.Cleanup(lift)
	return lift
}

func condition(cfg *jwksv1alpha1.JWKSConfig, conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(cfg.Status.Conditions, conditionType)
}

// deniedConfigMapWrites counts the API server's 422 answers to creates and applies of
// ConfigMaps.
func deniedConfigMapWrites(t *testing.T) int {
	t.Helper()
	n, err := testenv.APIRequests(context.Background(), env.Config, func(labels string) bool {
		return strings.Contains(labels, `resource="configmaps"`) && strings.Contains(labels, `code="422"`) &&
			(strings.Contains(labels, `verb="APPLY"`) || strings.Contains(labels, `verb="POST"`))
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAdmissionDenialIsReportedOnceAndRecovers: a ValidatingAdmissionPolicy refuses the
// JWK Set ConfigMap. The JWKSConfig says so (Ready=False and Stalled=True, reason
// AdmissionDenied, the ConfigMap and the policy's message), with one Warning event however
// often the write is retried; lifting the policy is enough for it to become Ready.
func TestAdmissionDenialIsReportedOnceAndRecovers(t *testing.T) {
	startManager(t, func(o *Options) { o.RetryBaseDelay, o.RetryMaxDelay = 50*time.Millisecond, 500*time.Millisecond })
	ns := newNamespace(t)
	lift := denyJWKSConfigMaps(t, ns)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "denied", "tls")

	cfg := waitReady(t, ns, "denied", metav1.ConditionFalse, conditions.ReasonAdmissionDenied)
	msg := readyCondition(cfg).Message
	// A new set without an issuer is made with a plain create (createsFirst).
	for _, want := range []string{"create ConfigMap " + ns + "/denied-jwks: ", "ValidatingAdmissionPolicy 'deny-jwks-" + ns + "'", policyMessage} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q lacks %q", msg, want)
		}
	}
	if s := condition(cfg, conditions.Stalled); s == nil || s.Status != metav1.ConditionTrue || s.Reason != conditions.ReasonAdmissionDenied {
		t.Errorf("Stalled = %+v", s)
	}
	if r := condition(cfg, conditions.Reconciling); r != nil {
		t.Errorf("Reconciling beside Stalled: %+v", r)
	}
	if cfg.Status.ObservedGeneration != cfg.Generation {
		t.Errorf("observedGeneration %d of a stalled generation %d", cfg.Status.ObservedGeneration, cfg.Generation)
	}

	// Retried with backoff, not given up; and said once.
	waitEvent(t, ns, "denied", conditions.ReasonAdmissionDenied)
	retries := deniedConfigMapWrites(t)
	testenv.Eventually(t, "three more refused creates", 30*time.Second, func() bool { return deniedConfigMapWrites(t) >= retries+3 })
	assertOneEvent(t, ns, "denied", conditions.ReasonAdmissionDenied)

	lift()
	cfg = waitReady(t, ns, "denied", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	if condition(cfg, conditions.Stalled) != nil || condition(cfg, conditions.Reconciling) != nil || cfg.Generation != 1 {
		t.Errorf("after the policy went: generation %d, conditions %+v", cfg.Generation, cfg.Status.Conditions)
	}
	if getConfigMap(t, ns, "denied-jwks").Data["jwks.json"] == "" {
		t.Error("no set published")
	}
	assertOneEvent(t, ns, "denied", conditions.ReasonAdmissionDenied)
}

// assertOneEvent: one Event with the reason, recorded once (the events library turns a
// repeated event into a series with a count).
func assertOneEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	got := eventsFor(t, ns, name, reason)
	if len(got) != 1 || got[0].Type != corev1.EventTypeWarning || got[0].Series != nil {
		t.Fatalf("%d %s events (%+v), want one Warning recorded once", len(got), reason, got)
	}
}

// TestAPersistentDenialEmitsOneEventAcrossRetries drives the retries by hand: each is an
// error to retry with backoff, never terminal, and only the first emits an event.
func TestAPersistentDenialEmitsOneEventAcrossRetries(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	denyJWKSConfigMaps(t, ns)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "retried", "tls")
	events := 0
	for i := range 4 {
		_, err := d.reconcile(t, ns, "retried")
		if err == nil || errors.Is(err, reconcile.TerminalError(nil)) {
			t.Fatalf("retry %d: %v, want an error retried with backoff", i, err)
		}
		events += d.countEvents(conditions.ReasonAdmissionDenied)
	}
	if events != 1 {
		t.Errorf("%d AdmissionDenied events for one denial retried 4 times", events)
	}
}

func (d *directReconciler) countEvents(reason string) int {
	n := 0
	for {
		select {
		case e := <-d.events.Events:
			if strings.Contains(e, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}

// TestObservedGenerationFollowsOnlyReadyOrStalled: while a generation waits (its Secret
// does not exist), status.observedGeneration stays where it was; Ready or Stalled for a
// generation advances it.
func TestObservedGenerationFollowsOnlyReadyOrStalled(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	newJWKSConfig(t, ns, "gen", "first-tls")
	waitReconciling := func(generation int64) *jwksv1alpha1.JWKSConfig {
		t.Helper()
		var cfg *jwksv1alpha1.JWKSConfig
		testenv.Eventually(t, fmt.Sprintf("Reconciling=True SecretNotFound for generation %d", generation), 30*time.Second, func() bool {
			cfg = getConfig(t, ns, "gen")
			r := condition(cfg, conditions.Reconciling)
			return cfg.Generation == generation && r != nil && r.Status == metav1.ConditionTrue && r.Reason == jwksv1alpha1.ReasonSecretNotFound && r.ObservedGeneration == generation
		})
		return cfg
	}
	check := func(step string, cfg *jwksv1alpha1.JWKSConfig, observed int64) {
		t.Helper()
		if cfg.Status.ObservedGeneration != observed {
			t.Errorf("%s: observedGeneration %d, want %d (generation %d)", step, cfg.Status.ObservedGeneration, observed, cfg.Generation)
		}
	}

	cfg := waitReconciling(1)
	check("waiting for the first Secret", cfg, 0)
	if r := readyCondition(cfg); r.Status != metav1.ConditionFalse || r.Reason != jwksv1alpha1.ReasonSecretNotFound {
		t.Errorf("Ready while waiting: %+v", r)
	}

	putSecret(t, ns, "first-tls", tlsData(newChain(t, testcerts.P256)))
	check("published", waitReady(t, ns, "gen", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished), 1)

	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.CertificateSecret = "second-tls"
	if err := env.Client.Patch(context.Background(), cfg, patch); err != nil {
		t.Fatal(err)
	}
	check("waiting for the second Secret", waitReconciling(2), 1)

	putSecret(t, ns, "second-tls", map[string][]byte{corev1.TLSCertKey: []byte("garbage")})
	check("stalled on the second Secret", waitReady(t, ns, "gen", metav1.ConditionFalse, "InvalidPEM"), 2)

	putSecret(t, ns, "second-tls", tlsData(newChain(t, testcerts.P256)))
	check("published again", waitReady(t, ns, "gen", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished), 2)
}

// TestThrottledUpdateSaysWhenItIsPublished: inside the update interval the JWKSConfig
// stays Ready (the previous set is served), is Reconciling, says when the change goes
// out, and asks to come back then.
func TestThrottledUpdateSaysWhenItIsPublished(t *testing.T) {
	d := newDirectReconciler(t, time.Minute)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "throttled", "tls", withoutNginx)
	d.mustReconcile(t, ns, "throttled") // creation: at once
	d.clock.Step(10 * time.Minute)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	d.mustReconcile(t, ns, "throttled") // first change after a quiet period: at once

	d.clock.Step(10 * time.Second)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	res := d.mustReconcile(t, ns, "throttled")
	publishAt := d.clock.Now().Add(50 * time.Second).UTC().Format(time.RFC3339)
	cfg := getConfig(t, ns, "throttled")
	ready, reconciling := readyCondition(cfg), condition(cfg, conditions.Reconciling)
	if res.RequeueAfter != 50*time.Second || ready.Status != metav1.ConditionTrue || ready.Reason != jwksv1alpha1.ReasonPublished ||
		reconciling == nil || reconciling.Status != metav1.ConditionTrue || !strings.Contains(reconciling.Message, publishAt) {
		t.Fatalf("throttled: requeue after %v, Ready %+v, Reconciling %+v (want the time %s)", res.RequeueAfter, ready, reconciling, publishAt)
	}

	d.clock.Step(50 * time.Second)
	d.mustReconcile(t, ns, "throttled")
	cfg = getConfig(t, ns, "throttled")
	if readyCondition(cfg).Status != metav1.ConditionTrue || condition(cfg, conditions.Reconciling) != nil || cfg.Status.KeyCount != 3 {
		t.Errorf("after the interval: %+v, %d keys", cfg.Status.Conditions, cfg.Status.KeyCount)
	}
}
