package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// ApplyRules turns rules into apply configurations the way upstream does: every slice
// carried over as it is. No rules gives nil, so an apply has no `rules` key at all.
func ApplyRules(rules []rbacv1.PolicyRule) []*rbacv1ac.PolicyRuleApplyConfiguration {
	var out []*rbacv1ac.PolicyRuleApplyConfiguration
	for _, rule := range rules {
		ac := rbacv1ac.PolicyRule()
		ac.Resources = rule.Resources
		ac.ResourceNames = rule.ResourceNames
		ac.APIGroups = rule.APIGroups
		ac.NonResourceURLs = rule.NonResourceURLs
		ac.Verbs = rule.Verbs
		out = append(out, ac)
	}
	return out
}
