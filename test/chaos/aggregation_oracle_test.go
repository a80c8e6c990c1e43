package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
)

// These tests reach no cluster: the aggregation settle check against worlds given by
// hand, with the real oracle (built as make aggregation-oracle builds it).

var (
	oracleGetPods      = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	oracleGetPodsEmpty = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{}}
	oracleListJobs     = rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{"batch"}, Resources: []string{"jobs"}}
	oracleDelSecrets   = rbacv1.PolicyRule{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
	oracleGetHealthz   = rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}
)

// oracleWorld: components a and c (team a), b (team b); agg selects team a, so
// kube-controller-manager applies a's rules then c's: get pods, list jobs, get /healthz.
func oracleWorld(aggRules ...rbacv1.PolicyRule) []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"team": "a"}}, Rules: []rbacv1.PolicyRule{oracleGetHealthz, oracleGetPods}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"team": "b"}}, Rules: []rbacv1.PolicyRule{oracleDelSecrets}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "a"}}, Rules: []rbacv1.PolicyRule{oracleGetPodsEmpty, oracleListJobs}},
		{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, Rules: aggRules,
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"team": "a"}}}}},
	}
}

const testInvariant = "aggregation: aggregated ClusterRoles as kube-controller-manager computes them"

// TestAggregationSettleCheck: the settle check reports, as a violation naming the
// invariant and the ClusterRole, every way an aggregated ClusterRole can differ from what
// kube-controller-manager applies, and nothing when it is equal as upstream compares.
func TestAggregationSettleCheck(t *testing.T) {
	oracle, err := aggregationOracle()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  string // in the violation; "" for none
	}{
		{"equal", []rbacv1.PolicyRule{oracleGetPods, oracleListJobs, oracleGetHealthz}, ""},
		// Inside a rule, nil and [] are equal (equality.Semantic), as for upstream.
		{"equal, resourceNames [] for nil", []rbacv1.PolicyRule{oracleGetPodsEmpty, oracleListJobs, oracleGetHealthz}, ""},
		{"a rule missing", []rbacv1.PolicyRule{oracleGetPods, oracleGetHealthz}, "missing [{[list] [batch] [jobs] [] []}]"},
		{"a rule from a role that does not match", []rbacv1.PolicyRule{oracleGetPods, oracleListJobs, oracleGetHealthz, oracleDelSecrets},
			"not upstream's [{[delete] [] [secrets] [] []}]"},
		{"no rules at all", nil, "missing"},
		// Upstream writes unless its list equals the role's in order: it would rewrite these.
		{"the same rules in another order", []rbacv1.PolicyRule{oracleGetHealthz, oracleGetPods, oracleListJobs}, "another order"},
		{"a rule twice", []rbacv1.PolicyRule{oracleGetPods, oracleListJobs, oracleGetHealthz, oracleGetPods}, "another order or repeated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Harness{T: t, start: time.Now()} // SettleTimeout 0: one look
			settleAggregated(context.Background(), h, testInvariant, oracle, staticWorld(oracleWorld(tc.rules...)))
			h.violatedMu.Lock()
			violated := strings.Join(h.violated, "\n")
			h.violatedMu.Unlock()
			if tc.want == "" {
				if h.violations.Load() != 0 || h.checks.Load() != 1 {
					t.Fatalf("checks %d, violations %d, want 1 and 0:\n%s", h.checks.Load(), h.violations.Load(), violated)
				}
				return
			}
			want := "VIOLATION " + testInvariant + ": ClusterRole agg: rules "
			if !strings.Contains(violated, want) || !strings.Contains(violated, tc.want) {
				t.Fatalf("violations:\n%s\nwant one with %q and %q", violated, want, tc.want)
			}
		})
	}
}

func staticWorld(roles []rbacv1.ClusterRole) func(context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
	return func(context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
		return roles, func(cr rbacv1.ClusterRole) string { return "ClusterRole " + cr.Name }, nil, nil
	}
}

// TestRolesThroughTheOracle: the workload's Role selectors (kubectl syntax) become
// aggregation rules that select what the annotation says: rules written by hand.
func TestRolesThroughTheOracle(t *testing.T) {
	oracle, err := aggregationOracle()
	if err != nil {
		t.Fatal(err)
	}
	role := func(name string, l map[string]string, annotation string, rules ...rbacv1.PolicyRule) rbacv1.Role {
		r := rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: aggregationNamespace, Name: name, Labels: l}, Rules: rules}
		if annotation != "" {
			r.Annotations = map[string]string{roleaggregation.SelectorAnnotation: annotation}
		}
		return r
	}
	roles := []rbacv1.Role{
		role("component-01", map[string]string{componentLabel: "true", teamLabel: "a"}, "", oracleGetPods),
		role("component-02", map[string]string{componentLabel: "true", teamLabel: "b", tierLabel: "x"}, "", oracleListJobs),
		role("component-03", map[string]string{componentLabel: "true", teamLabel: "c"}, "", oracleDelSecrets),
		role("component-04", map[string]string{componentLabel: "true"}, "", oracleGetPods, oracleGetPodsEmpty),
		role("in", nil, teamLabel+" in (a,c)"),
		role("notin", nil, componentLabel+","+teamLabel+" notin (a)"),
		role("exists", nil, tierLabel),
		role("equals", nil, teamLabel+"=b,"+tierLabel+"=x"),
		role("broken", nil, teamLabel+" in (a"),
	}
	world, bad := rolesAsClusterRoles(roles)
	if len(world) != len(roles) || len(bad) != 1 || bad["broken"] == nil {
		t.Fatalf("%d roles converted, selectors that do not convert %v: want %d and only broken's", len(world), bad, len(roles))
	}
	got, err := runOracle(context.Background(), oracle, world)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]rbacv1.PolicyRule{
		"in":     {oracleGetPods, oracleDelSecrets},
		"notin":  {oracleListJobs, oracleDelSecrets, oracleGetPods},
		"exists": {oracleListJobs},
		"equals": {oracleListJobs},
	}
	if len(got) != len(want) {
		t.Errorf("the oracle answered for %d roles, want %d: %+v", len(got), len(want), got)
	}
	for name, rules := range want {
		var diffs []string
		for _, cr := range world {
			if cr.Name == name {
				cr.Rules = rules
				diffs = aggregationDiffs([]rbacv1.ClusterRole{cr}, got, func(cr rbacv1.ClusterRole) string { return cr.Name })
			}
		}
		if len(diffs) > 0 {
			t.Errorf("Role %s: %s", name, diffs)
		}
	}
}
