package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

// refuseMachineType makes a ValidatingAdmissionPolicy in the garden API server refuse,
// with the given reason (Invalid: 422, Forbidden: 403), every write of a Shoot of this
// test's Clusters whose worker uses machineType: the garden's own answer, as Gardener's
// admission plugins give it. It returns a function that lifts the policy.
func refuseMachineType(t *testing.T, machineType string, reason metav1.StatusReason) (message string, lift func()) {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("refuse-%s-%s", machineType, ns))
	message = fmt.Sprintf("test garden: machine type %s is not offered", machineType)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{shoot.GVK.Group}, APIVersions: []string{shoot.GVK.Version}, Resources: []string{"shoots"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.spec.provider.workers.all(w, w.machine.type != '%s')", machineType),
				Message:    message, Reason: &reason,
			}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{operatorv1alpha1.ClusterNamespaceLabel: ns}}},
		}}
	for _, obj := range []client.Object{policy, binding} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// In force once a dry-run write of such a Shoot is refused with the policy's message.
	probe := func() bool {
		// A Shoot the test garden's schema accepts (it refuses incomplete ones before any
		// policy runs), with the refused machine type, labelled for this test's namespace.
		c := gcpCluster("probe", "europe-west3")
		c.Spec.Infrastructure.MachineType = machineType
		s, err := shoot.Desired(c, testParams(), "probe")
		if err != nil {
			t.Fatal(err)
		}
		s.SetName("probe-" + name[:min(len(name), 40)])
		err = mgmt.Client.Create(ctx, s, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), message)
	}
	testenv.Eventually(t, "the policy in force", 30*time.Second, probe)
	lift = func() {
		for _, obj := range []client.Object{binding, policy} {
			_ = client.IgnoreNotFound(mgmt.Client.Delete(ctx, obj))
		}
		testenv.Eventually(t, "the policy lifted", 30*time.Second, func() bool { return !probe() })
	}
	t.Cleanup(lift)
	return message, lift
}

func shootWorker(t *testing.T, name string) map[string]any {
	t.Helper()
	s, err := getShoot(shoot.Name(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	if len(workers) != 1 {
		t.Fatalf("workers %v", workers)
	}
	return workers[0].(map[string]any)
}

func machineTypeOf(w map[string]any) any { return w["machine"].(map[string]any)["type"] }

// reportOperation plays a step of Gardener's periodic reconcile on the Shoot's status.
func reportOperation(t *testing.T, shootName, state string, progress int64) {
	t.Helper()
	s, err := getShoot(shootName)
	if err != nil {
		t.Fatal(err)
	}
	op := map[string]any{"type": "Reconcile", "state": state, "progress": progress, "description": "test reconcile"}
	if err := unstructured.SetNestedMap(s.Object, op, "status", "lastOperation"); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// TestShootWrittenOnlyWhenDesiredChanges: Gardener's status updates on the Shoot cause no
// write of it; a change of the Cluster's spec reaches the Shoot with a write.
func TestShootWrittenOnlyWhenDesiredChanges(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-w", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "quiet"
	if err := mgmt.Client.Create(ctx, gcpCluster(name, "europe-west3")); err != nil {
		t.Fatal(err)
	}
	shootName := shoot.Name(ns, name)
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	if gardenFront.ShootWritesFor(shootName) == 0 {
		t.Fatal("the front counted no write of the shoot: the count proves nothing")
	}

	// Gardener reports its reconcile, step by step: the Cluster follows, the Shoot is not written.
	writes := gardenFront.ShootWritesFor(shootName)
	for i, step := range []struct {
		state    string
		progress int64
	}{{"Processing", 10}, {"Processing", 60}, {"Succeeded", 100}} {
		reportOperation(t, shootName, step.state, step.progress)
		want := fmt.Sprintf("Reconcile %s (%d%%)", strings.ToLower(step.state), step.progress)
		testenv.Eventually(t, fmt.Sprintf("step %d reported on the Cluster", i), 30*time.Second, func() bool {
			cond := meta.FindStatusCondition(getCluster(t, name).Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
			return cond != nil && strings.Contains(cond.Message, want)
		})
	}
	time.Sleep(time.Second) // room for a wrong implementation's late writes
	if n := gardenFront.ShootWritesFor(shootName); n != writes {
		t.Errorf("Gardener's status updates caused %d writes of the shoot", n-writes)
	}

	// A spec change reaches the Shoot.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) {
		c.Spec.Infrastructure.AutoScalerMax = 5
		c.Spec.Infrastructure.MachineType = "n2-standard-8"
	})
	testenv.Eventually(t, "the spec change on the shoot", 30*time.Second, func() bool {
		w := shootWorker(t, name)
		return w["maximum"] == int64(5) && machineTypeOf(w) == "n2-standard-8"
	})
	if gardenFront.ShootWritesFor(shootName) == writes {
		t.Error("the shoot changed without a write through the garden front")
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	s, err := getShoot(shootName)
	if err != nil {
		t.Fatal(err)
	}
	if s.GetAnnotations()["cluster.trustplane.io/desired-hash"] == "" {
		t.Error("the shoot carries no hash of what was applied")
	}
}

// TestGardenAnswersClassified: the garden's 422 stalls the Cluster with InvalidSpec and
// Gardener's message, its 403 with GardenForbidden; 5xx and 429 are GardenUnreachable and
// retried. Nothing in the garden is deleted, and a provisioned cluster stays provisioned.
func TestGardenAnswersClassified(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-e", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "refused"
	if err := mgmt.Client.Create(ctx, gcpCluster(name, "europe-west3")); err != nil {
		t.Fatal(err)
	}
	shootName := shoot.Name(ns, name)
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	invalidMsg, _ := refuseMachineType(t, "refused-invalid", metav1.StatusReasonInvalid)
	forbiddenMsg, liftForbidden := refuseMachineType(t, "refused-forbidden", metav1.StatusReasonForbidden)

	assertShootKept := func(machineType string) {
		t.Helper()
		s, err := getShoot(shootName)
		if err != nil || s.GetDeletionTimestamp() != nil {
			t.Fatalf("the shoot was deleted after a refusal: %v", err)
		}
		if got := machineTypeOf(shootWorker(t, name)); got != machineType {
			t.Errorf("shoot machine type %v, want %s", got, machineType)
		}
		c := getCluster(t, name)
		if !meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned) {
			t.Error("a refused change made the running cluster not provisioned")
		}
	}

	// 422: stalled for good, with the garden's message; no retry loop.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.MachineType = "refused-invalid" })
	cond := waitCondition(t, name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInvalidSpec)
	for _, want := range []string{"the garden refused to apply shoot " + projectNamespace + "/" + shootName + " as invalid", invalidMsg, "ValidatingAdmissionPolicy"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("InvalidSpec message %q lacks %q", cond.Message, want)
		}
	}
	c := getCluster(t, name)
	if ready := meta.FindStatusCondition(c.Status.Conditions, conditions.Ready); ready.Status != metav1.ConditionFalse || ready.Reason != operatorv1alpha1.ReasonInvalidSpec {
		t.Errorf("Ready %+v", ready)
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, conditions.Reconciling); r != nil {
		t.Errorf("Reconciling beside Stalled: %+v", r)
	}
	writes := gardenFront.ShootWritesFor(shootName)
	time.Sleep(2 * time.Second)
	if n := gardenFront.ShootWritesFor(shootName); n != writes {
		t.Errorf("an invalid shoot was retried %d times", n-writes)
	}
	assertShootKept("n2-standard-4")

	// 403: stalled, GardenForbidden; retried with backoff, so lifting the policy is enough.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.MachineType = "refused-forbidden" })
	cond = waitCondition(t, name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonGardenForbidden)
	if !strings.Contains(cond.Message, forbiddenMsg) || !strings.Contains(cond.Message, "the garden forbids to apply shoot") {
		t.Errorf("GardenForbidden message %q", cond.Message)
	}
	assertShootKept("n2-standard-4")
	liftForbidden()
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	if got := machineTypeOf(shootWorker(t, name)); got != "refused-forbidden" {
		t.Errorf("after the policy was lifted the shoot has machine type %v", got)
	}

	// 5xx and 429: the garden is unreachable for now; retried, not stalled.
	t.Cleanup(func() { gardenFront.FailShootWrites.Store(0) })
	for i, code := range []int32{500, 429} {
		gardenFront.FailShootWrites.Store(code)
		changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.AutoScalerMax = int32(6 + i) })
		cond = waitCondition(t, name, conditions.Reconciling, metav1.ConditionTrue, operatorv1alpha1.ReasonGardenUnreachable)
		if !strings.Contains(cond.Message, "injected by the test front") {
			t.Errorf("%d: GardenUnreachable message %q", code, cond.Message)
		}
		if s := meta.FindStatusCondition(getCluster(t, name).Status.Conditions, conditions.Stalled); s != nil {
			t.Errorf("%d: Stalled %+v", code, s)
		}
	}
	gardenFront.FailShootWrites.Store(0)
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	if got := shootWorker(t, name)["maximum"]; got != int64(7) {
		t.Errorf("shoot maximum %v after the garden answered again, want 7", got)
	}

	if err := mgmt.Client.Delete(ctx, getCluster(t, name)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster to go", 30*time.Second, gone(mgmt.Client, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
}
