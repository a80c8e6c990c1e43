package rbac

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzAggregationSelector: whatever a Role's author writes in the annotation
// rbac.trustplane.io/aggregate-from (parsed as the role-aggregation controller parses it),
// it is refused or aggregates only rules of other roles it selects, each once, the same
// when its canonical form is parsed again; and a selector parsed from the same text twice
// aggregates the same.
func FuzzAggregationSelector(f *testing.F) {
	for _, s := range []string{"team=a", "team in (a,b),!secret", "x notin (y)", "", "a=b,c!=d,e", "==", "team=a,team=b"} {
		f.Add(s)
	}
	candidates := []Source{
		{Name: "self", Labels: map[string]string{"team": "a"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}},
		{Name: "reader", Labels: map[string]string{"team": "a"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}},
		{Name: "writer", Labels: map[string]string{"team": "b", "secret": "1"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, Resources: []string{"secrets"}}}},
		{Name: "dup", Labels: map[string]string{"x": "z"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}},
	}
	f.Fuzz(func(t *testing.T, raw string) {
		selector, err := labels.Parse(raw)
		if err != nil {
			return
		}
		rules := Aggregate("self", []labels.Selector{selector}, candidates)
		var allowed []rbacv1.PolicyRule
		for _, c := range candidates[1:] {
			if selector.Matches(labels.Set(c.Labels)) {
				allowed = append(allowed, c.Rules...)
			}
		}
		for i, r := range rules {
			if !slices.ContainsFunc(allowed, func(a rbacv1.PolicyRule) bool { return ruleEqual(a, r) }) {
				t.Fatalf("%q aggregates a rule of no role it selects (self's?): %+v", raw, r)
			}
			if slices.ContainsFunc(rules[:i], func(a rbacv1.PolicyRule) bool { return ruleEqual(a, r) }) {
				t.Fatalf("%q aggregates %+v twice", raw, r)
			}
		}
		again, err := labels.Parse(selector.String())
		if err != nil {
			t.Fatalf("%q: the canonical form %q does not parse: %v", raw, selector.String(), err)
		}
		if !RulesEqual(Aggregate("self", []labels.Selector{again}, candidates), rules) {
			t.Fatalf("%q and its canonical form %q aggregate differently", raw, selector.String())
		}
	})
}
