package roleaggregation

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

const (
	// PolicyName is the ValidatingAdmissionPolicy (config/policy, the chart's
	// role-aggregation-policy.yaml) that refuses SelectorAnnotation to anyone who may not
	// escalate Roles in the namespace, and PolicyBindingName its binding. The controller
	// looks for both by these names.
	PolicyName        = "trustplane-role-aggregation"
	PolicyBindingName = "trustplane-role-aggregation"
)

// PolicyEnforced says whether the policy and its binding, as read (nil: absent), refuse
// the annotation to non-escalators in every namespace, and if not, why. It trusts the
// policy's expressions (they are ours, by name); what it checks is what an operator could
// loosen without editing them: the binding must Deny (Warn or Audit alone would let the
// annotation through), point at the policy, and not be narrowed to some Roles only, and
// the policy must fail closed.
func PolicyEnforced(policy *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (bool, string) {
	switch {
	case policy == nil:
		return false, fmt.Sprintf("ValidatingAdmissionPolicy %s is not installed", PolicyName)
	case binding == nil:
		return false, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s is not installed", PolicyBindingName)
	case binding.Spec.PolicyName != PolicyName:
		return false, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s binds policy %q, not %s", PolicyBindingName, binding.Spec.PolicyName, PolicyName)
	case !slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny):
		return false, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s does not Deny (validationActions %v)", PolicyBindingName, binding.Spec.ValidationActions)
	case narrowed(binding.Spec.MatchResources):
		return false, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s is narrowed by matchResources to some Roles only", PolicyBindingName)
	case policy.Spec.FailurePolicy != nil && *policy.Spec.FailurePolicy != admissionregistrationv1.Fail:
		return false, fmt.Sprintf("ValidatingAdmissionPolicy %s has failurePolicy %s, not Fail", PolicyName, *policy.Spec.FailurePolicy)
	}
	return true, ""
}

// narrowed: matchResources that leaves some Roles out (selectors that select, rules that
// exclude or restrict). The API server defaults empty selectors to {}, which matches all.
func narrowed(m *admissionregistrationv1.MatchResources) bool {
	if m == nil {
		return false
	}
	return (m.NamespaceSelector != nil && (len(m.NamespaceSelector.MatchLabels) > 0 || len(m.NamespaceSelector.MatchExpressions) > 0)) ||
		(m.ObjectSelector != nil && (len(m.ObjectSelector.MatchLabels) > 0 || len(m.ObjectSelector.MatchExpressions) > 0)) ||
		len(m.ResourceRules) > 0 || len(m.ExcludeResourceRules) > 0
}
