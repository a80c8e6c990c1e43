package config

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestStatusPolicyCoversEveryKind: the policy trustplane-status-writers matches the status
// subresource of every trustplane kind that has one, so a kind added later cannot be left
// out of it unnoticed.
func TestStatusPolicyCoversEveryKind(t *testing.T) {
	policy := statusPolicy(t)
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Subresources == nil || v.Subresources.Status == nil {
				continue
			}
			checked++
			if !matches(policy.Spec.MatchConstraints.ResourceRules, crd.Spec.Group, crd.Spec.Names.Plural+"/status") {
				t.Errorf("%s/status (%s) is not matched by %s", crd.Spec.Names.Plural, crd.Spec.Group, policy.Name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no CRD with a status subresource")
	}
}

func statusPolicy(t *testing.T) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	objs, err := Policies()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() == "ValidatingAdmissionPolicy" && obj.GetName() == "trustplane-status-writers" {
			policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, policy); err != nil {
				t.Fatal(err)
			}
			return policy
		}
	}
	t.Fatal("config/policy has no ValidatingAdmissionPolicy trustplane-status-writers")
	return nil
}

// matches says whether a rule matches updates of resource in group.
func matches(rules []admissionregistrationv1.NamedRuleWithOperations, group, resource string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
			(slices.Contains(r.Operations, admissionregistrationv1.Update) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) {
			return true
		}
	}
	return false
}
