package aggregation_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/aggregation/clusterroleaggregation"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/aggregation/sidebyside"
)

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// Other field managers that set an aggregated role's rules themselves.
const (
	kubectlManager = "kubectl-client-side-apply" // kubectl apply without --server-side
	helmManager    = "helm"                      // Helm 4 applies server-side
)

var (
	staleRules = []rbacv1.PolicyRule{rule("delete", "everything")}
	// The sources' rules, in name order: what every aggregator here ends up with.
	sourceRules = []rbacv1.PolicyRule{rule("get", "pods"), rule("list", "secrets")}
)

// byKubectl creates obj as client-side `kubectl apply` does: a create under kubectl's
// field manager, with the applied configuration in the last-applied annotation.
func byKubectl(t *testing.T, cl client.Client, obj client.Object) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	annotations := map[string]string{corev1.LastAppliedConfigAnnotation: string(raw)}
	for k, v := range obj.GetAnnotations() {
		annotations[k] = v
	}
	obj.SetAnnotations(annotations)
	if err := cl.Create(context.Background(), obj, client.FieldOwner(kubectlManager)); err != nil {
		t.Fatal(err)
	}
}

func byHelm(t *testing.T, cl client.Client, obj runtime.ApplyConfiguration) {
	t.Helper()
	if err := cl.Apply(context.Background(), obj, client.FieldOwner(helmManager)); err != nil {
		t.Fatal(err)
	}
}

// rulesOwners lists the field managers that own the rules of an object.
func rulesOwners(t *testing.T, obj client.Object) []string {
	t.Helper()
	var owners []string
	for _, mf := range obj.GetManagedFields() {
		fields := map[string]any{}
		if mf.FieldsV1 != nil {
			if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := fields["f:rules"]; ok {
			owners = append(owners, mf.Manager)
		}
	}
	slices.Sort(owners)
	return owners
}

// clusterRolesByOthers creates two sources and two aggregators whose stale rules another
// manager set: one by kubectl's client-side apply, one by Helm's server-side apply.
func clusterRolesByOthers(t *testing.T, cl client.Client) {
	t.Helper()
	selector := metav1.LabelSelector{MatchLabels: map[string]string{"force": "true"}}
	mustCreate(t, cl,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "force-src-a", Labels: map[string]string{"force": "true"}}, Rules: sourceRules[:1]},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "force-src-b", Labels: map[string]string{"force": "true"}}, Rules: sourceRules[1:]})
	byKubectl(t, cl, &rbacv1.ClusterRole{
		TypeMeta:        metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta:      metav1.ObjectMeta{Name: "force-by-kubectl"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{selector}},
		Rules:           staleRules,
	})
	byHelm(t, cl, rbacv1ac.ClusterRole("force-by-helm").
		WithAggregationRule(rbacv1ac.AggregationRule().WithClusterRoleSelectors(metav1ac.LabelSelector().WithMatchLabels(selector.MatchLabels))).
		WithRules(rbac.ApplyRules(staleRules)...))
}

// converged waits until the ClusterRole name holds the sources' rules and returns it.
func converged(t *testing.T, cl client.Client, name string) *rbacv1.ClusterRole {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	testenv.Eventually(t, name+" aggregated", 60*time.Second, func() bool {
		return get(t, cl, role, "", name) == nil && rbac.RulesEqual(role.Rules, sourceRules)
	})
	return role
}

// TestForceTakesRulesFromOtherManagers: an aggregated ClusterRole whose rules kubectl or
// Helm set ends up with the aggregated rules, owned by upstream's field manager alone, with
// trustplane as with kube-controller-manager (both byte for byte the same); and the same
// for an aggregated Role, under trustplane's own field manager.
func TestForceTakesRulesFromOtherManagers(t *testing.T) {
	kcm, err := sidebyside.StartSide("kube-controller-manager", t.TempDir(), sidebyside.KubeControllerManager(filepath.Dir(testenv.Tool(t, "k8s/kube-controller-manager"))))
	if err != nil {
		t.Fatal(err)
	}
	defer kcm.Stop()
	ours := startEnv(t)
	runBoth(t, ours)

	for _, side := range []client.Client{kcm.Client, ours.Client} {
		clusterRolesByOthers(t, side)
	}
	for _, name := range []string{"force-by-kubectl", "force-by-helm"} {
		theirs, got := converged(t, kcm.Client, name), converged(t, ours.Client, name)
		want := []string{clusterroleaggregation.FieldOwner}
		if owners := rulesOwners(t, theirs); !slices.Equal(owners, want) {
			t.Errorf("kube-controller-manager: %s rules owned by %v, want %v", name, owners, want)
		}
		if owners := rulesOwners(t, got); !slices.Equal(owners, want) {
			t.Errorf("trustplane: %s rules owned by %v, want %v", name, owners, want)
		}
		a, _ := json.Marshal(theirs.Rules)
		b, _ := json.Marshal(got.Rules)
		if string(a) != string(b) {
			t.Errorf("%s rules differ:\n kube-controller-manager %s\n trustplane              %s", name, a, b)
		}
	}

	t.Run("Role", func(t *testing.T) {
		ns := ours.Namespace(t, "force")
		labels := map[string]string{"force": "true"}
		mustCreate(t, ours.Client,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src-a", Labels: labels}, Rules: sourceRules[:1]},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src-b", Labels: labels}, Rules: sourceRules[1:]})
		annotations := map[string]string{roleaggregation.SelectorAnnotation: "force=true"}
		byKubectl(t, ours.Client, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-kubectl", Annotations: annotations},
			Rules:      staleRules,
		})
		byHelm(t, ours.Client, rbacv1ac.Role("by-helm", ns).WithAnnotations(annotations).WithRules(rbac.ApplyRules(staleRules)...))
		for _, name := range []string{"by-kubectl", "by-helm"} {
			role := &rbacv1.Role{}
			testenv.Eventually(t, name+" aggregated", 60*time.Second, func() bool {
				return get(t, ours.Client, role, ns, name) == nil && rbac.RulesEqual(role.Rules, sourceRules)
			})
			if owners := rulesOwners(t, role); !slices.Equal(owners, []string{roleaggregation.FieldOwner}) {
				t.Errorf("%s rules owned by %v, want only %s", name, owners, roleaggregation.FieldOwner)
			}
		}
	})
}
