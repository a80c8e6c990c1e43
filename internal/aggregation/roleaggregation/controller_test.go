package roleaggregation

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

var ctx = context.Background()

// startManager runs the controller with --role-aggregation-trust-role-authors: these tests
// are about what aggregation does, and no admission policy is installed (aggregating with
// the flag on and the policy absent is itself shown by TestNamespacedAggregation).
func startManager(t *testing.T) {
	t.Helper()
	startManagerWith(t, Options{Workers: 2, TrustRoleAuthors: true})
}

func startManagerWith(t *testing.T, opts Options) {
	t.Helper()
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
}

func namespace(t *testing.T) string { return env.Namespace(t, "roleagg") }

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func createRole(t *testing.T, ns, name string, lbls, annotations map[string]string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: annotations}, Rules: rules}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
}

func getRole(t *testing.T, ns, name string) *rbacv1.Role {
	t.Helper()
	role := &rbacv1.Role{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, role); err != nil {
		t.Fatal(err)
	}
	return role
}

func waitRules(t *testing.T, ns, name string, want ...rbacv1.PolicyRule) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !rbac.RulesEqual(getRole(t, ns, name).Rules, want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s rules = %v, want %v", ns, name, getRole(t, ns, name).Rules, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNamespacedAggregation(t *testing.T) {
	startManager(t)
	ns, other := namespace(t), namespace(t)
	agg := map[string]string{"aggregate-to-dev": "true"}
	createRole(t, ns, "zz-logs", agg, nil, rule("get", "pods/log"), rule("get", "pods"))
	createRole(t, ns, "aa-pods", agg, nil, rule("get", "pods"), rule("list", "pods"))
	createRole(t, ns, "unrelated", map[string]string{"x": "y"}, nil, rule("delete", "pods"))
	createRole(t, other, "elsewhere", agg, nil, rule("get", "secrets"))
	createRole(t, ns, "dev", agg, map[string]string{SelectorAnnotation: "aggregate-to-dev=true"})
	// Name order, self skipped, duplicates dropped, other namespaces never included.
	waitRules(t, ns, "dev", rule("get", "pods"), rule("list", "pods"), rule("get", "pods/log"))

	role := getRole(t, ns, "aa-pods")
	role.Labels = nil
	if err := env.Client.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	waitRules(t, ns, "dev", rule("get", "pods/log"), rule("get", "pods"))

	owned := false
	for _, mf := range getRole(t, ns, "dev").ManagedFields {
		owned = owned || (mf.Manager == FieldOwner && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !owned {
		t.Errorf("rules not applied by %s", FieldOwner)
	}
}

func TestInvalidSelectorLeavesRoleUntouchedWithAWarning(t *testing.T) {
	startManager(t)
	ns := namespace(t)
	createRole(t, ns, "src", map[string]string{"a": "b"}, nil, rule("get", "pods"))
	createRole(t, ns, "broken", nil, map[string]string{SelectorAnnotation: "a in (b"}, rule("get", "mine"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range list.Items {
			found = found || (e.Regarding.Name == "broken" && e.Reason == aggregation.ReasonInvalidSelector && e.Type == corev1.EventTypeWarning)
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no InvalidSelector Warning event")
		}
		time.Sleep(50 * time.Millisecond)
	}
	role := getRole(t, ns, "broken")
	if !rbac.RulesEqual(role.Rules, []rbacv1.PolicyRule{rule("get", "mine")}) {
		t.Errorf("rules changed: %v", role.Rules)
	}
	// Fixing the annotation aggregates.
	role.Annotations[SelectorAnnotation] = "a=b"
	if err := env.Client.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	waitRules(t, ns, "broken", rule("get", "pods"))
}
