package kubeconfig_test

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestDeletedBeforeItsStatusWasStoredLeavesNothingInTheTarget: the status write that ends
// a reconcile may never happen (the manager killed or stopped mid-way, the API server down,
// a policy refusing it) after the request's ServiceAccount, roles, bindings and token
// bindings were written into the target. Found by the chaos suite (test/chaos,
// "kubeconfig: no orphan in target", a SIGTERM of the leader): status.grantedIn was set in
// memory only, so the request, deleted then, had nothing recorded, went at once and left
// everything in the target. Here a ValidatingAdmissionPolicy refuses every status write
// that publishes a kubeconfig, so no reconcile ends with its status stored.
func TestDeletedBeforeItsStatusWasStoredLeavesNothingInTheTarget(t *testing.T) {
	setup(t)
	const name = "unrecorded"
	lift := refuseIssuedStatus(t, name)
	defer lift()
	createAll(t, roleRequest(ns, name, "target"))
	waitHeld(t, target.Client, ns, name, "ServiceAccount "+"trustplane-kubeconfigs", "Role team", "RoleBinding team")
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
		t.Fatal(err)
	}
	if kr.Status.Kubeconfig != "" {
		t.Fatal("the policy let a kubeconfig into the status: the test shows nothing")
	}
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request gone", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &operatorv1alpha1.KubeconfigRequest{}))
	})
	if got := held(t, target.Client, ns, name); len(got) != 0 {
		t.Errorf("left in the target by the deleted request: %v", got)
	}
}

// refuseIssuedStatus makes a ValidatingAdmissionPolicy refuse every status write that
// carries a kubeconfig, of the requests whose names start with name; lift removes it.
func refuseIssuedStatus(t *testing.T, name string) (lift func()) {
	t.Helper()
	return refuseStatus(t, name, "!has(object.status.kubeconfig) || object.status.kubeconfig == ''")
}

// refuseStatus makes a ValidatingAdmissionPolicy refuse every status write of the requests
// whose names start with name unless allowed (a CEL expression) holds; lift removes it.
func refuseStatus(t *testing.T, name, allowed string) (lift func()) {
	t.Helper()
	policyName := "refuse-status-" + name
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{operatorv1alpha1.GroupVersion.Group}, APIVersions: []string{operatorv1alpha1.GroupVersion.Version},
						Resources: []string{"kubeconfigrequests/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!object.metadata.name.startsWith('" + name + "') || (" + allowed + ")",
				Message:    "refused by this test",
			}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		}}
	for _, obj := range []client.Object{policy, binding} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The policy is in force once it refuses a dry-run status write of a probe request
	// (of a Cluster that does not exist: the operator holds nothing for it).
	probe := roleRequest(ns, name+"-probe", "no-such-cluster")
	createAll(t, probe)
	defer func() { _ = mgmt.Client.Delete(ctx, probe) }()
	testenv.Eventually(t, "the policy in force", 30*time.Second, func() bool {
		issued := probe.DeepCopy()
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(probe), issued); err != nil {
			return false
		}
		issued.Status.Kubeconfig = "cHJvYmU="
		return apierrors.IsInvalid(mgmt.Client.Status().Update(ctx, issued, client.DryRunAll)) ||
			apierrors.IsForbidden(mgmt.Client.Status().Update(ctx, issued, client.DryRunAll))
	})
	return func() {
		for _, obj := range []client.Object{binding, policy} {
			_ = client.IgnoreNotFound(mgmt.Client.Delete(ctx, obj))
		}
	}
}
