package status

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// want is what an object's status must say after a step.
type want struct {
	ready, reconciling, stalled string // "" absent, else "True/Reason" or "False/Reason"
	observedGeneration          int64
	kstatus                     kstatus.Status
}

func conditionSummary(obj conditions.Object, conditionType string) string {
	c := meta.FindStatusCondition(obj.GetConditions(), conditionType)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// computeKstatus is what kstatus (Flux's and Argo CD's health checks, kubectl's kstatus)
// makes of obj.
func computeKstatus(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) *kstatus.Result {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkStatus(t *testing.T, step string, obj *jwksv1alpha1.JWKSConfig, w want) {
	t.Helper()
	got := want{
		ready: conditionSummary(obj, conditions.Ready), reconciling: conditionSummary(obj, conditions.Reconciling),
		stalled: conditionSummary(obj, conditions.Stalled), observedGeneration: obj.Status.ObservedGeneration,
		kstatus: computeKstatus(t, obj, jwksv1alpha1.GroupVersion.WithKind("JWKSConfig")).Status,
	}
	if got != w {
		t.Errorf("%s:\n got %+v\nwant %+v", step, got, w)
	}
	for _, c := range obj.Status.Conditions {
		if c.ObservedGeneration != obj.Generation {
			t.Errorf("%s: condition %s computed for generation %d, the object is at %d", step, c.Type, c.ObservedGeneration, obj.Generation)
		}
	}
}

// TestOutcomesAsConditionsAndAsKstatusSeesThem walks one object through every outcome and
// checks the conditions, the observedGeneration rule (advanced only when Ready or
// Stalled), and what kstatus computes from them.
func TestOutcomesAsConditionsAndAsKstatusSeesThem(t *testing.T) {
	obj := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", Generation: 1}}
	record := func(err error) { NewPatcher(obj).Record(nil, err) }
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x-jwks", errors.New("RBAC says no"))

	record(Waiting(jwksv1alpha1.ReasonSecretNotFound, "Secret %q does not exist", "tls"))
	checkStatus(t, "waiting on the first generation", obj, want{ready: "False/SecretNotFound", reconciling: "True/SecretNotFound", kstatus: kstatus.InProgressStatus})

	MarkReady(obj, jwksv1alpha1.ReasonPublished, "published")
	checkStatus(t, "ready", obj, want{ready: "True/Published", observedGeneration: 1, kstatus: kstatus.CurrentStatus})

	record(apierrors.NewServiceUnavailable("etcd is away"))
	checkStatus(t, "a transient error on the ready generation", obj, want{ready: "True/Published", reconciling: "True/TransientError", observedGeneration: 1, kstatus: kstatus.InProgressStatus})

	MarkReady(obj, jwksv1alpha1.ReasonPublished, "published")
	checkStatus(t, "ready again", obj, want{ready: "True/Published", observedGeneration: 1, kstatus: kstatus.CurrentStatus})

	obj.Generation = 2
	record(Transient("TargetUnreachable", errors.New("connection refused")))
	checkStatus(t, "a transient error on a new generation", obj, want{ready: "False/TargetUnreachable", reconciling: "True/TargetUnreachable", observedGeneration: 1, kstatus: kstatus.InProgressStatus})

	record(Stalled("InvalidPEM", "tls.crt holds no PEM block"))
	checkStatus(t, "stalled on bad input", obj, want{ready: "False/InvalidPEM", stalled: "True/InvalidPEM", observedGeneration: 2, kstatus: kstatus.FailedStatus})

	record(WriteFailed("apply", &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "x-jwks", Namespace: "ns"}}, forbidden))
	checkStatus(t, "a write refused for good", obj, want{ready: "False/Forbidden", stalled: "True/Forbidden", observedGeneration: 2, kstatus: kstatus.FailedStatus})

	MarkReady(obj, jwksv1alpha1.ReasonPublished, "published")
	checkStatus(t, "recovered", obj, want{ready: "True/Published", observedGeneration: 2, kstatus: kstatus.CurrentStatus})

	// A rotation waiting for the update interval: the previous set is still served.
	record(Waiting(jwksv1alpha1.ReasonUpdateThrottled, "published at noon").KeepReady())
	checkStatus(t, "waiting while what was achieved holds", obj, want{ready: "True/Published", reconciling: "True/UpdateThrottled", observedGeneration: 2, kstatus: kstatus.InProgressStatus})
	MarkReady(obj, jwksv1alpha1.ReasonPublished, "published")

	obj.Generation = 3
	record(Waiting(jwksv1alpha1.ReasonUpdateThrottled, "published at noon").KeepReady())
	checkStatus(t, "waiting on a later generation", obj, want{ready: "False/UpdateThrottled", reconciling: "True/UpdateThrottled", observedGeneration: 2, kstatus: kstatus.InProgressStatus})

	// kstatus reads Ready=False as in progress: a health check keeps waiting for an object
	// that is, by its own request, not usable.
	MarkNotReady(obj, "Revoked", "revoked on request")
	checkStatus(t, "reconciled into not ready on request", obj, want{ready: "False/Revoked", observedGeneration: 3, kstatus: kstatus.InProgressStatus})
}

func TestConditionMessagesStayWithinTheSchemaLimit(t *testing.T) {
	obj := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	long := strings.Repeat("é", maxMessageLength) // two bytes each
	MarkWaiting(obj, "Long", long)
	msg := meta.FindStatusCondition(obj.Status.Conditions, conditions.Ready).Message
	if len(msg) > maxMessageLength || !strings.HasSuffix(msg, "…") || !strings.HasPrefix(msg, "éé") {
		t.Errorf("message of %d bytes, ends %q", len(msg), msg[len(msg)-8:])
	}
	if !strings.Contains(msg[:len(msg)-len("…")], "é") || strings.ContainsRune(msg, '\uFFFD') {
		t.Error("cut inside a character")
	}
}

// TestOutcomeOfErrors: what decides the outcome of an error, wrapped or not.
func TestOutcomeOfErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no"))
	notYet := Waiting("ClusterNotReady", "cluster %q is not provisioned yet", "c")
	for _, tc := range []struct {
		name   string
		err    error
		kind   kind
		reason string
	}{
		{"a plain error", errors.New("boom"), retrying, conditions.ReasonTransientError},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "s", errors.New("modified")), retrying, conditions.ReasonTransientError},
		{"a persistent API error, wrapped", fmt.Errorf("context: %w", forbidden), refused, conditions.ReasonForbidden},
		{"Transient with a reason", Transient("GardenUnreachable", errors.New("503")), retrying, "GardenUnreachable"},
		{"Transient of a persistent API error", Transient("GardenUnreachable", forbidden), refused, conditions.ReasonForbidden},
		{"Transient of a Waiting error", Transient("TargetUnreachable", fmt.Errorf("context: %w", notYet)), waiting, "ClusterNotReady"},
		{"Warn of a plain error", Warn(errors.New("boom")), retrying, conditions.ReasonTransientError},
		{"Stalled", Stalled("Denied", "denied: %s", "escalate"), stalled, "Denied"},
	} {
		e := outcomeOf(tc.err)
		if e.kind != tc.kind || e.reason != tc.reason || Reason(tc.err) != tc.reason {
			t.Errorf("%s: kind %d reason %q, want %d %q", tc.name, e.kind, e.reason, tc.kind, tc.reason)
		}
	}
	if Transient("x", nil) != nil || Warn(nil) != nil || WriteFailed("create", &jwksv1alpha1.JWKSConfig{}, nil) != nil {
		t.Error("nil did not stay nil")
	}
	if !errors.Is(Transient("x", fmt.Errorf("w: %w", forbidden)), forbidden) || !apierrors.IsForbidden(WriteFailed("create", &jwksv1alpha1.JWKSConfig{}, forbidden)) {
		t.Error("the API server's error is not visible through the outcome")
	}
	if e := outcomeOf(Warn(Transient("GardenUnreachable", errors.New("503")))); !e.warn {
		t.Error("Warn did not reach the outcome")
	}
}
