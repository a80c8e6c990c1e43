// Package rbac is the pure logic of RBAC rule aggregation: which rules an aggregating role
// gets, exactly as kube-controller-manager's clusterrole-aggregation controller computes
// them, and an index that tells which aggregators a role change can affect; plus
// IgnoreIfGone: how to take a refused write, given what the API server says of the role.
// It reaches no cluster: the controllers read and write.
package rbac

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sort"

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
	seen := map[uint64]int{} // hash of a collected rule → its index in rules
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
				if !collected(rules, seen, rule) {
					seen[ruleHash(rule)] = len(rules)
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules
}

// collected says whether rules already hold rule. The hash turns upstream's quadratic
// duplicate scan into a map lookup; a hash collision between different rules (which the
// exact comparison detects) falls back to upstream's scan, so answers never change.
func collected(rules []rbacv1.PolicyRule, seen map[uint64]int, rule rbacv1.PolicyRule) bool {
	i, ok := seen[ruleHash(rule)]
	if !ok {
		return false
	}
	if ruleEqual(rules[i], rule) {
		return true
	}
	for j := range rules {
		if ruleEqual(rules[j], rule) {
			return true
		}
	}
	return false
}

// hashSeed is fixed per process: hashes are only compared within one.
var hashSeed = maphash.MakeSeed()

// ruleHash hashes every field of a rule, in order, lengths included, so that rules
// ruleEqual calls equal hash equally, without allocating (syncs hash thousands of rules).
func ruleHash(r rbacv1.PolicyRule) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var n [8]byte
	for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(field)))
		_, _ = h.Write(n[:])
		for _, s := range field {
			binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
			_, _ = h.Write(n[:])
			_, _ = h.WriteString(s)
		}
	}
	return h.Sum64()
}

// RulesHash hashes a rule list: equal lists (RulesEqual) hash equally. It lets a
// controller recognize its own write coming back from the watch without keeping the rules.
func RulesHash(rules []rbacv1.PolicyRule) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var n [8]byte
	for _, r := range rules {
		binary.LittleEndian.PutUint64(n[:], ruleHash(r))
		_, _ = h.Write(n[:])
	}
	return h.Sum64()
}

// ruleEqual is equality.Semantic.DeepEqual for two rules: every field, in order, with a
// nil slice the same as an empty one.
func ruleEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.Resources, b.Resources) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// RulesEqual is equality.Semantic.DeepEqual for rule lists: the comparison upstream
// makes to decide that nothing needs to be written.
func RulesEqual(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, ruleEqual)
}
