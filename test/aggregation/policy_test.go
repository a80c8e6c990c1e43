package aggregation_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/testenv"
)

// shippedPolicy is the admission policy and binding of `kubectl kustomize config/default`:
// what an install applies, not a copy written for the test.
func shippedPolicy(t *testing.T) []client.Object {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Tool(t, "k8s/kubectl"), "kustomize", filepath.Join(testenv.RepoRoot(), "config/default"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, stderr.String())
	}
	var objs []client.Object
	for _, obj := range testenv.DecodeYAML(t, out) {
		if obj.GroupVersionKind().Group == "admissionregistration.k8s.io" && obj.GetName() == roleaggregation.PolicyName {
			objs = append(objs, obj)
		}
	}
	if len(objs) != 2 {
		t.Fatalf("config/default renders %d admission objects named %s, want the policy and its binding", len(objs), roleaggregation.PolicyName)
	}
	return objs
}

// grant binds user to a new Role of rules in ns.
func grant(t *testing.T, env *testenv.Env, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	mustCreate(t, env.Client,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})
}

func rbacRule(verbs []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{rbacv1.GroupName}, Resources: resources}
}

// refusedByPolicy: err is the policy's refusal, naming the annotation and the right needed.
func refusedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), roleaggregation.SelectorAnnotation) &&
		strings.Contains(err.Error(), "escalate")
}

// TestAggregationNeedsTheRightToEscalate is issue 17's escalation: alice may create Roles
// and RoleBindings but not serviceaccounts/token; she annotates a Role of hers to aggregate
// a platform Role that holds it. With the shipped policy installed the API server refuses
// the annotation to her, as it refuses an aggregationRule to who may not escalate, while
// an escalator sets it and the manager (its generated RBAC, no trust flag) aggregates.
func TestAggregationNeedsTheRightToEscalate(t *testing.T) {
	admin := startEnv(t)
	sa := asManager(t, admin)
	ctx := context.Background()
	ns := admin.Namespace(t, "tenant")
	token := rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}}
	mustCreate(t, admin.Client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform", Labels: map[string]string{"tier": "platform"}},
		Rules: []rbacv1.PolicyRule{token}})
	edit := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	grant(t, admin, ns, "alice", rbacRule(edit, "roles", "rolebindings"), rule("get", "configmaps"))
	grant(t, admin, ns, "erin", rbacRule(edit, "roles", "rolebindings"), rbacRule([]string{"escalate"}, "roles"))
	alice, erin := admin.As(t, "alice"), admin.As(t, "erin")
	annotated := func(name, selector string) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{roleaggregation.SelectorAnnotation: selector}}}
	}

	// The control: without the policy the API server lets alice set the annotation.
	if err := alice.Create(ctx, annotated("probe", "tier=platform"), client.DryRunAll); err != nil {
		t.Fatalf("without the policy, alice's annotated Role: %v (the test would prove nothing)", err)
	}
	for _, obj := range shippedPolicy(t) {
		if err := admin.Client.Create(ctx, obj); err != nil {
			t.Fatalf("installing %s: %v", obj.GetName(), err)
		}
	}
	// The API server loads policies asynchronously.
	var err error
	testenv.Eventually(t, "the policy to refuse alice", 30*time.Second, func() bool {
		err = alice.Create(ctx, annotated("probe", "tier=platform"), client.DryRunAll)
		return err != nil
	})
	if !refusedByPolicy(err) {
		t.Fatalf("alice's annotated Role refused with %v, want Forbidden naming %s and escalate", err, roleaggregation.SelectorAnnotation)
	}

	// The manager runs as installed: generated RBAC, no --role-aggregation-trust-role-authors.
	sa.RunManager(t, func(mgr ctrl.Manager) error {
		_, err := roleaggregation.Setup(mgr, roleaggregation.Options{Workers: 2})
		return err
	})

	t.Run("alice may not set it on create or update", func(t *testing.T) {
		if err := alice.Create(ctx, annotated("alice-create", "tier=platform")); !refusedByPolicy(err) {
			t.Errorf("create with the annotation: %v, want refused by the policy", err)
		}
		mine := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-update"}, Rules: []rbacv1.PolicyRule{rule("get", "configmaps")}}
		if err := alice.Create(ctx, mine); err != nil {
			t.Fatalf("a plain Role: %v", err)
		}
		mine.Annotations = map[string]string{roleaggregation.SelectorAnnotation: "tier=platform"}
		if err := alice.Update(ctx, mine); !refusedByPolicy(err) {
			t.Errorf("update adding the annotation: %v, want refused by the policy", err)
		}
	})

	t.Run("an escalator may, and the manager aggregates", func(t *testing.T) {
		if err := erin.Create(ctx, annotated("erin-dev", "tier=platform")); err != nil {
			t.Fatalf("erin, who may escalate: %v", err)
		}
		got := &rbacv1.Role{}
		testenv.Eventually(t, "erin's Role aggregated", 30*time.Second, func() bool {
			return get(t, admin.Client, got, ns, "erin-dev") == nil && rbac.RulesEqual(got.Rules, []rbacv1.PolicyRule{token})
		})
	})

	t.Run("an update that keeps the annotation is not checked; changing it is", func(t *testing.T) {
		// A Role erin annotated, with no rules alice lacks (RBAC's own escalation check
		// on updates would refuse her otherwise, policy or not).
		if err := erin.Create(ctx, annotated("shared", "tier=none")); err != nil {
			t.Fatal(err)
		}
		shared := &rbacv1.Role{}
		if err := get(t, alice, shared, ns, "shared"); err != nil {
			t.Fatal(err)
		}
		shared.Labels = map[string]string{"team": "a"}
		if err := alice.Update(ctx, shared); err != nil {
			t.Fatalf("alice relabels a Role whose annotation she leaves alone: %v", err)
		}
		shared.Annotations[roleaggregation.SelectorAnnotation] = "tier=platform"
		if err := alice.Update(ctx, shared); !refusedByPolicy(err) {
			t.Errorf("alice retargets the annotation: %v, want refused by the policy", err)
		}
		// Taking it off gives no one anything: allowed.
		if err := get(t, alice, shared, ns, "shared"); err != nil {
			t.Fatal(err)
		}
		delete(shared.Annotations, roleaggregation.SelectorAnnotation)
		if err := alice.Update(ctx, shared); err != nil {
			t.Errorf("alice removes the annotation: %v", err)
		}
	})

	// Whatever alice tried, no Role she can bind holds the platform's rule.
	roles := &rbacv1.RoleList{}
	if err := admin.Client.List(ctx, roles, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		if strings.HasPrefix(r.Name, "alice") && rbac.RulesEqual(r.Rules, []rbacv1.PolicyRule{token}) {
			t.Errorf("Role %s got the platform's rules", r.Name)
		}
	}
}
