// Package rbac is the pure logic of RBAC rule aggregation: which rules an aggregating role
// gets, exactly as kube-controller-manager's clusterrole-aggregation controller computes
// them, and an index that tells which aggregators a role change can affect.
package rbac

import (
	"sort"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Source is a role whose rules can be aggregated.
type Source struct {
	Name   string
	Labels map[string]string
	Rules  []rbacv1.PolicyRule
}

// Aggregate computes the rules of the aggregating role self, as upstream does:
//
//   - start from an empty, non-nil list;
//   - for each selector in order, take the matching candidates sorted by name, skipping
//     self, and append each of their rules not already collected;
//   - "already collected" is equality.Semantic.DeepEqual of the whole rule (order inside
//     the slices matters; nil and empty slices are equal), across all selectors, first
//     occurrence wins.
//
// candidates are every role in scope (any order); they contribute their current rules.
func Aggregate(self string, selectors []labels.Selector, candidates []Source) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{}
	seen := map[string]bool{}
	var matched []*Source
	for _, selector := range selectors {
		matched = matched[:0]
		for i := range candidates {
			if candidates[i].Name != self && selector.Matches(labels.Set(candidates[i].Labels)) {
				matched = append(matched, &candidates[i])
			}
		}
		sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
		for _, c := range matched {
			for _, rule := range c.Rules {
				key := ruleKey(rule)
				if !seen[key] {
					seen[key] = true
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules
}

// ruleKey is equal for two rules exactly when equality.Semantic.DeepEqual says they are:
// every field, in order, with a nil slice the same as an empty one. It turns upstream's
// quadratic duplicate scan into a map lookup without changing its answers.
func ruleKey(r rbacv1.PolicyRule) string {
	var b strings.Builder
	for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
		b.WriteString(strconv.Itoa(len(field)))
		b.WriteByte('[')
		for _, s := range field {
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// RulesEqual is equality.Semantic.DeepEqual for rule lists: the comparison upstream
// makes to decide that nothing needs to be written.
func RulesEqual(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if ruleKey(a[i]) != ruleKey(b[i]) {
			return false
		}
	}
	return true
}
