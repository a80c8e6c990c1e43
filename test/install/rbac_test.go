package install

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trustplane/trustplane/internal/testenv"
)

// managerRules is the rules of the manager's ClusterRole in a render.
func managerRules(t *testing.T, objs []*unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == "ClusterRole" && obj.GetName() == "trustplane-manager" {
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
				t.Fatal(err)
			}
			return role.Rules
		}
	}
	t.Fatal("the render has no ClusterRole trustplane-manager")
	return nil
}

// TestManagerRBACIsLeastPrivilege checks the manager's ClusterRole as kustomize and Helm
// render it: no wildcards; signing and attesting for its own signerName only; the Secret
// update rule of the pod-certificate signer limited to its CA Secret; the admission policy
// readable by name only, never writable.
func TestManagerRBACIsLeastPrivilege(t *testing.T) {
	root := testenv.RepoRoot()
	renders := map[string][]*unstructured.Unstructured{
		"kustomize": testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "k8s/kubectl"), "kustomize", filepath.Join(root, "config/default"))),
		"helm": testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
			"--namespace", "trustplane-system")),
	}
	for name, objs := range renders {
		t.Run(name, func(t *testing.T) {
			var signerVerbs, caSecretVerbs []string
			for _, r := range managerRules(t, objs) {
				for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
					if slices.Contains(list, "*") {
						t.Errorf("wildcard in %+v", r)
					}
				}
				for _, res := range r.Resources {
					switch {
					case slices.Contains(r.APIGroups, "certificates.k8s.io") && res == "signers":
						if !slices.Equal(r.ResourceNames, []string{"trustplane.io/pod-identity"}) {
							t.Errorf("signers granted for %q, want only trustplane.io/pod-identity: %+v", r.ResourceNames, r)
						}
						signerVerbs = append(signerVerbs, r.Verbs...)
					case slices.Contains(r.APIGroups, "") && res == "secrets" && slices.Equal(r.ResourceNames, []string{"trustplane-pod-identity-ca"}):
						caSecretVerbs = append(caSecretVerbs, r.Verbs...)
					case slices.Contains(r.APIGroups, "admissionregistration.k8s.io"):
						if !slices.Equal(r.ResourceNames, []string{"trustplane-role-aggregation"}) || !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
							t.Errorf("admission policies: want get, list, watch of trustplane-role-aggregation only: %+v", r)
						}
					}
				}
			}
			slices.Sort(signerVerbs)
			if !slices.Equal(signerVerbs, []string{"attest", "sign"}) {
				t.Errorf("signer verbs %v, want attest and sign", signerVerbs)
			}
			if !slices.Contains(caSecretVerbs, "update") {
				t.Errorf("no update of the CA Secret by name (verbs %v)", caSecretVerbs)
			}
		})
	}
}

// TestChartAdmissionPolicyValues: the chart installs each admission policy unless told
// not to, and passes --role-aggregation-trust-role-authors only when told to.
func TestChartAdmissionPolicyValues(t *testing.T) {
	root := testenv.RepoRoot()
	helm := testenv.Tool(t, "helm")
	for _, tc := range []struct {
		set                          string
		policy, trusts, statusPolicy bool
	}{
		{"replicaCount=2", true, false, true},
		{"roleAggregation.admissionPolicy=false", false, false, true},
		{"roleAggregation.trustRoleAuthors=true", true, true, true},
		{"statusWriters.admissionPolicy=false", true, false, false},
	} {
		objs := testenv.DecodeYAML(t, run(t, root, helm, "template", "trustplane", filepath.Join(root, "charts/trustplane"), "--namespace", "trustplane-system", "--set", tc.set))
		rendered := map[string]bool{}
		for _, obj := range objs {
			rendered[obj.GetKind()+" "+obj.GetName()] = true
		}
		for policy, want := range map[string]bool{"trustplane-role-aggregation": tc.policy, "trustplane-status-writers": tc.statusPolicy,
			"trustplane-owner-labels": tc.statusPolicy, "trustplane-finalizers": tc.statusPolicy} {
			if got := rendered["ValidatingAdmissionPolicy "+policy] && rendered["ValidatingAdmissionPolicyBinding "+policy]; got != want {
				t.Errorf("--set %s: policy and binding %s rendered: %v, want %v", tc.set, policy, got, want)
			}
		}
		if got := slices.Contains(managerArgs(t, objs), "--role-aggregation-trust-role-authors"); got != tc.trusts {
			t.Errorf("--set %s: --role-aggregation-trust-role-authors passed: %v, want %v", tc.set, got, tc.trusts)
		}
	}
}
