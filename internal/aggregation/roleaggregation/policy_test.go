package roleaggregation

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/testenv"
)

func TestPolicyEnforced(t *testing.T) {
	policy := func(fp *admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: PolicyName},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: fp}}
	}
	binding := func(name string, m *admissionregistrationv1.MatchResources, actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: PolicyBindingName},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: actions, MatchResources: m}}
	}
	deny, warn := admissionregistrationv1.Deny, admissionregistrationv1.Warn
	everything := &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}}
	someNamespaces := &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	ignore := admissionregistrationv1.Ignore
	for _, tc := range []struct {
		name    string
		policy  *admissionregistrationv1.ValidatingAdmissionPolicy
		binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		want    bool
		why     string
	}{
		{"as shipped", policy(ptr.To(admissionregistrationv1.Fail)), binding(PolicyName, nil, deny), true, ""},
		{"defaulted selectors match everything", policy(nil), binding(PolicyName, everything, warn, deny), true, ""},
		{"no policy", nil, binding(PolicyName, nil, deny), false, "ValidatingAdmissionPolicy trustplane-role-aggregation is not installed"},
		{"no binding", policy(nil), nil, false, "ValidatingAdmissionPolicyBinding trustplane-role-aggregation is not installed"},
		{"binds another policy", policy(nil), binding("other", nil, deny), false, `binds policy "other"`},
		{"warns only", policy(nil), binding(PolicyName, nil, warn), false, "does not Deny"},
		{"narrowed", policy(nil), binding(PolicyName, someNamespaces, deny), false, "narrowed"},
		{"fails open", policy(&ignore), binding(PolicyName, nil, deny), false, "failurePolicy Ignore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := PolicyEnforced(tc.policy, tc.binding)
			if got != tc.want || !strings.Contains(why, tc.why) || (tc.want && why != "") {
				t.Errorf("PolicyEnforced = %v, %q; want %v, %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// renderedPolicy is config/policy as `kubectl kustomize` renders it: the objects shipped.
func renderedPolicy(t *testing.T) []client.Object {
	t.Helper()
	kubectl := testenv.Tool(t, "k8s/kubectl")
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config/policy"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/policy: %v\n%s", err, stderr.String())
	}
	var objs []client.Object
	for _, obj := range testenv.DecodeYAML(t, out) {
		if obj.GetName() == PolicyName {
			objs = append(objs, obj)
		}
	}
	if len(objs) != 2 {
		t.Fatalf("config/policy renders %d objects named %s, want the policy and its binding", len(objs), PolicyName)
	}
	return objs
}

// warnings counts the AggregationNotTrusted Warning events about a Role.
func warnings(t *testing.T, ns, name string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == aggregation.ReasonUntrustedAnnotation && e.Type == corev1.EventTypeWarning {
			n++
			if !strings.Contains(e.Note, SelectorAnnotation) || !strings.Contains(e.Note, "--role-aggregation-trust-role-authors") {
				t.Errorf("event note does not say what is ignored and what to do: %q", e.Note)
			}
		}
	}
	return n
}

// TestAnnotationIgnoredUntilThePolicyIsInstalled: with the flag off and no admission
// policy, an annotated Role is left as it is, with one Warning event however often it
// syncs; installing the shipped policy (watched) makes the controller aggregate it.
func TestAnnotationIgnoredUntilThePolicyIsInstalled(t *testing.T) {
	startManagerWith(t, Options{Workers: 2})
	ns := namespace(t)
	createRole(t, ns, "platform", map[string]string{"tier": "platform"}, nil,
		rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}})
	createRole(t, ns, "mine", nil, map[string]string{SelectorAnnotation: "tier=platform"}, rule("get", "configmaps"))

	testenv.Eventually(t, "an AggregationNotTrusted Warning event", 20*time.Second, func() bool { return warnings(t, ns, "mine") > 0 })
	// More syncs of the same Role: a label change, a change of a source. Still one event.
	role := getRole(t, ns, "mine")
	role.Labels = map[string]string{"touched": "1"}
	if err := env.Client.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	platform := getRole(t, ns, "platform")
	platform.Rules = append(platform.Rules, rule("get", "secrets"))
	if err := env.Client.Update(ctx, platform); err != nil {
		t.Fatal(err)
	}
	// A second Role in the same situation is told too: the event is per Role.
	createRole(t, ns, "yours", nil, map[string]string{SelectorAnnotation: "tier=platform"})
	testenv.Eventually(t, "a Warning event for the second Role", 20*time.Second, func() bool { return warnings(t, ns, "yours") > 0 })
	if n := warnings(t, ns, "mine"); n != 1 {
		t.Errorf("%d AggregationNotTrusted events for one Role, want 1", n)
	}
	if got := getRole(t, ns, "mine").Rules; !rbac.RulesEqual(got, []rbacv1.PolicyRule{rule("get", "configmaps")}) {
		t.Fatalf("rules aggregated without the policy: %v", got)
	}

	// The shipped policy, as rendered: the controller sees it and aggregates.
	for _, obj := range renderedPolicy(t) {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("installing %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	waitRules(t, ns, "mine", getRole(t, ns, "platform").Rules...)
}
