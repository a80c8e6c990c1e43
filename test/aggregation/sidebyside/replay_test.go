package sidebyside

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
)

// TestReplayCountsTheAggregatorsEachEventChanges walks a two-level world through the
// kinds of op the churn makes and checks, after each, how many aggregators changed and
// what the top one holds.
func TestReplayCountsTheAggregatorsEachEventChanges(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, Resources: []string{"pods"}}
	source := func(name, team string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"src": "true", "team": team}}, Rules: rules}
	}
	selecting := func(name string, own, match map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: own}, Rules: rules,
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: match}}}}
	}
	replay := NewReplay([]rbacv1.ClusterRole{
		*source("s1", "a", get),
		*source("s2", "b", list),
		selecting("agg1", map[string]string{"level": "1"}, map[string]string{"team": "a"}, get),
		selecting("agg2", nil, map[string]string{"level": "1"}, get),
	})
	for _, step := range []struct {
		what    string
		op      Op
		changed int
		agg2    []rbacv1.PolicyRule
	}{
		{"a rule edit of a selected source reaches both levels", Op{Name: "s1", Patch: map[string]any{"rules": []rbacv1.PolicyRule{get, list}}}, 2, []rbacv1.PolicyRule{get, list}},
		{"a rule edit nobody selects changes nothing", Op{Name: "s2", Patch: map[string]any{"rules": []rbacv1.PolicyRule{get}}}, 0, []rbacv1.PolicyRule{get, list}},
		{"removing the selected label empties both", Op{Name: "s1", Patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": nil}}}}, 2, []rbacv1.PolicyRule{}},
		{"a new selected source", Op{Name: "s3", Create: source("s3", "a", list)}, 2, []rbacv1.PolicyRule{list}},
		{"a selector change of the first level", Op{Name: "agg1", Patch: map[string]any{"aggregationRule": map[string]any{"clusterRoleSelectors": []metav1.LabelSelector{{MatchLabels: map[string]string{"team": "b"}}}}}}, 2, []rbacv1.PolicyRule{get}},
		{"deleting a source the first level no longer selects", Op{Name: "s3", Delete: true}, 0, []rbacv1.PolicyRule{get}},
		{"a patch of a role already gone", Op{Name: "s3", Patch: map[string]any{"rules": []rbacv1.PolicyRule{list}}}, 0, []rbacv1.PolicyRule{get}},
		{"deleting the source the first level selects", Op{Name: "s2", Delete: true}, 2, []rbacv1.PolicyRule{}},
	} {
		changed, err := replay.Apply(step.op)
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if changed != step.changed {
			t.Errorf("%s: %d aggregators changed, want %d", step.what, changed, step.changed)
		}
		if got := replay.Rules()["agg2"]; !rbac.RulesEqual(got, step.agg2) {
			t.Errorf("%s: agg2 holds %v, want %v", step.what, got, step.agg2)
		}
	}
	if _, err := replay.Apply(Op{Name: "s1", Patch: map[string]any{"spec": 1}}); err == nil {
		t.Error("a patch of a field the corpus never patches was replayed")
	}
}
