package rbac

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// upstreamAggregate is kube-controller-manager's algorithm written out plainly (sort the
// matches, skip self, quadratic Semantic.DeepEqual scan), as the reference.
func upstreamAggregate(self string, selectors []labels.Selector, candidates []Source) []rbacv1.PolicyRule {
	out := []rbacv1.PolicyRule{}
	for _, sel := range selectors {
		var matched []Source
		for _, c := range candidates {
			if sel.Matches(labels.Set(c.Labels)) {
				matched = append(matched, c)
			}
		}
		sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
		for _, c := range matched {
			if c.Name == self {
				continue
			}
			for _, r := range c.Rules {
				exists := false
				for _, have := range out {
					if equality.Semantic.DeepEqual(have, r) {
						exists = true
						break
					}
				}
				if !exists {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

func randomStrings(r *rand.Rand, pool []string) []string {
	switch r.Intn(6) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	n := 1 + r.Intn(3)
	out := make([]string, n)
	for i := range out {
		out[i] = pool[r.Intn(len(pool))]
	}
	return out
}

func randomRule(r *rand.Rand) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		Verbs:           randomStrings(r, []string{"get", "list", "watch", "create"}),
		APIGroups:       randomStrings(r, []string{"", "apps", "batch"}),
		Resources:       randomStrings(r, []string{"pods", "deployments", "jobs"}),
		ResourceNames:   randomStrings(r, []string{"a", "b"}),
		NonResourceURLs: randomStrings(r, []string{"/healthz", "/metrics"}),
	}
}

func randomSelector(r *rand.Rand) labels.Selector {
	exprs := [][]metav1.LabelSelectorRequirement{
		nil,
		{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
		{{Key: "tier", Operator: metav1.LabelSelectorOpExists}},
		{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"c"}}},
	}
	ls := &metav1.LabelSelector{MatchExpressions: exprs[r.Intn(len(exprs))]}
	if r.Intn(2) == 0 {
		ls.MatchLabels = map[string]string{"team": []string{"a", "b", "c"}[r.Intn(3)]}
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		panic(err)
	}
	return s
}

// TestAggregateMatchesUpstreamOnRandomInputs: 2,000 random worlds, including nil vs
// empty slices, duplicate rules across roles, self-selection and overlapping selectors.
func TestAggregateMatchesUpstreamOnRandomInputs(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for world := range 2000 {
		var candidates []Source
		for i := range 1 + r.Intn(12) {
			s := Source{Name: fmt.Sprintf("role-%02d", r.Intn(40)+i*40), Labels: map[string]string{}}
			if r.Intn(3) > 0 {
				s.Labels["team"] = []string{"a", "b", "c"}[r.Intn(3)]
			}
			if r.Intn(2) == 0 {
				s.Labels["tier"] = "x"
			}
			for range r.Intn(5) {
				s.Rules = append(s.Rules, randomRule(r))
			}
			candidates = append(candidates, s)
		}
		self := candidates[r.Intn(len(candidates))].Name
		var selectors []labels.Selector
		for range 1 + r.Intn(3) {
			selectors = append(selectors, randomSelector(r))
		}
		got, want := Aggregate(self, selectors, candidates), upstreamAggregate(self, selectors, candidates)
		if !equality.Semantic.DeepEqual(got, want) || len(got) != len(want) {
			t.Fatalf("world %d: Aggregate differs from upstream:\n got %v\nwant %v", world, got, want)
		}
	}
}

func TestAggregateOrderSelfExclusionAndEmptyResult(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, Resources: []string{"pods"}}
	getEmptyGroups := rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}, APIGroups: []string{}}
	candidates := []Source{
		{Name: "zeta", Labels: map[string]string{"agg": "x"}, Rules: []rbacv1.PolicyRule{list}},
		{Name: "alpha", Labels: map[string]string{"agg": "x"}, Rules: []rbacv1.PolicyRule{get, getEmptyGroups}},
		{Name: "self", Labels: map[string]string{"agg": "x"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}}}},
	}
	sel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"agg": "x"}})
	got := Aggregate("self", []labels.Selector{sel}, candidates)
	if len(got) != 2 || got[0].Verbs[0] != "get" || got[1].Verbs[0] != "list" {
		t.Errorf("got %v, want [get list] (name order, self skipped, nil == empty)", got)
	}
	none, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"agg": "none"}})
	if got := Aggregate("self", []labels.Selector{none}, candidates); got == nil || len(got) != 0 {
		t.Errorf("nothing matches: got %#v, want a non-nil empty list", got)
	}
}

func TestRulesEqualIsSemanticDeepEqual(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for range 5000 {
		a := []rbacv1.PolicyRule{randomRule(r)}
		b := []rbacv1.PolicyRule{randomRule(r)}
		if r.Intn(3) == 0 {
			b = a
		}
		if RulesEqual(a, b) != equality.Semantic.DeepEqual(a, b) {
			t.Fatalf("RulesEqual(%v, %v) = %v, Semantic.DeepEqual disagrees", a, b, RulesEqual(a, b))
		}
	}
	if !RulesEqual(nil, []rbacv1.PolicyRule{}) || !equality.Semantic.DeepEqual([]rbacv1.PolicyRule(nil), []rbacv1.PolicyRule{}) {
		t.Error("nil and empty rule lists must be equal")
	}
	// Separators cannot be forged by content.
	x := rbacv1.PolicyRule{Verbs: []string{"a", "b"}}
	y := rbacv1.PolicyRule{Verbs: []string{"a,b"}}
	if RulesEqual([]rbacv1.PolicyRule{x}, []rbacv1.PolicyRule{y}) {
		t.Error("different rules compare equal")
	}
}
