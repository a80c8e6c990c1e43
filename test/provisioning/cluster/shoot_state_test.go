package cluster_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

// TestShootErrorsReachTheCluster: the Shoot's last operation and errors are mirrored in
// the Cluster's status; a creation Gardener does not retry (ERR_INFRA_UNAUTHORIZED) stalls
// the Cluster naming the code, one it retries (ERR_INFRA_RESOURCES_DEPLETED) keeps it
// Reconciling; after provisioning, a reconcile of this generation that failed with a code
// Gardener does not retry stalls it with the cluster still provisioned, and one that
// succeeds makes it Ready again.
func TestShootErrorsReachTheCluster(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-errors", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	for _, c := range []*operatorv1alpha1.Cluster{gcpCluster("unauthorized", gardenstandin.UnauthorizedRegion), gcpCluster("depleted", gardenstandin.DepletedRegion)} {
		if err := mgmt.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	cond := waitCondition(t, "unauthorized", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioningFailed)
	if !strings.Contains(cond.Message, "Gardener does not retry ERR_INFRA_UNAUTHORIZED: task \"Deploying Shoot infrastructure\" failed: UnauthorizedOperation") {
		t.Errorf("Stalled says %q", cond.Message)
	}
	st := getCluster(t, "unauthorized").Status
	if op := st.ShootLastOperation; op == nil || op.Type != "Create" || op.State != "Failed" ||
		len(st.ShootLastErrors) != 1 || strings.Join(st.ShootLastErrors[0].Codes, ",") != "ERR_INFRA_UNAUTHORIZED" || st.ShootLastErrors[0].TaskID != "deploy-infrastructure" {
		t.Errorf("status.shootLastOperation %+v, shootLastErrors %+v", op, st.ShootLastErrors)
	}
	cond = waitCondition(t, "depleted", conditions.Reconciling, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioningError)
	if !strings.Contains(cond.Message, "ERR_INFRA_RESOURCES_DEPLETED (retried)") {
		t.Errorf("Reconciling says %q", cond.Message)
	}
	if meta.IsStatusConditionTrue(getCluster(t, "depleted").Status.Conditions, conditions.Stalled) {
		t.Error("a retryable error stalled the Cluster")
	}

	// A provisioned Cluster whose reconcile of this generation fails.
	name := "reconciled"
	if err := mgmt.Client.Create(ctx, gcpCluster(name, "europe-west3")); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	reportReconcile(t, shoot.Name(ns, name), "Failed", "ERR_CONFIGURATION_PROBLEM")
	cond = waitCondition(t, name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonShootReconcileFailed)
	if !strings.Contains(cond.Message, "Gardener does not retry ERR_CONFIGURATION_PROBLEM") {
		t.Errorf("Stalled says %q", cond.Message)
	}
	if !meta.IsStatusConditionTrue(getCluster(t, name).Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned) {
		t.Error("a failed reconcile took ClusterProvisioned away: the cluster still serves")
	}
	reportReconcile(t, shoot.Name(ns, name), "Error", "ERR_RETRYABLE_INFRA_DEPENDENCIES")
	waitCondition(t, name, conditions.Reconciling, metav1.ConditionTrue, operatorv1alpha1.ReasonShootReconcileError)
	reportReconcile(t, shoot.Name(ns, name), "Succeeded", "")
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
}

// reportReconcile plays gardenlet reporting a reconcile of the Shoot's current generation
// in state, with an error of code when code is set.
func reportReconcile(t *testing.T, shootName, state, code string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := getShoot(shootName)
		if err != nil {
			return err
		}
		status := s.Object["status"].(map[string]any)
		status["observedGeneration"] = s.GetGeneration()
		status["lastOperation"] = map[string]any{"type": "Reconcile", "state": state, "progress": int64(60), "description": "reconcile " + strings.ToLower(state),
			"lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}
		delete(status, "lastErrors")
		if code != "" {
			status["lastErrors"] = []any{map[string]any{"description": "task failed: " + code, "codes": []any{code}}}
		}
		return mgmt.Client.Status().Update(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShootPatchSuspendedAndForced: with the suspend annotation a change of the Cluster
// leaves its Shoot as it is (Reconciling, ShootPatchSuspended) until the annotation goes;
// a Shoot edited by hand stays so (it carries the Cluster's hash) until the force
// annotation has it written again, which then removes the annotation.
func TestShootPatchSuspendedAndForced(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-patch", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "patched"
	if err := mgmt.Client.Create(ctx, gcpCluster(name, "europe-west3")); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	shootName := shoot.Name(ns, name)
	maximum := func() int64 {
		s, err := getShoot(shootName)
		if err != nil {
			t.Fatal(err)
		}
		workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
		m, _, _ := unstructured.NestedInt64(workers[0].(map[string]any), "maximum")
		return m
	}
	changeCluster(t, name, func(c *operatorv1alpha1.Cluster) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, operatorv1alpha1.SuspendPatchAnnotation, "true")
	})
	changeCluster(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.AutoScalerMax = 4 })
	cond := waitCondition(t, name, conditions.Reconciling, metav1.ConditionTrue, operatorv1alpha1.ReasonShootPatchSuspended)
	if !strings.Contains(cond.Message, operatorv1alpha1.SuspendPatchAnnotation) {
		t.Errorf("Reconciling says %q", cond.Message)
	}
	if m := maximum(); m != 3 {
		t.Errorf("a suspended Cluster's shoot changed to maximum %d", m)
	}
	changeCluster(t, name, func(c *operatorv1alpha1.Cluster) { delete(c.Annotations, operatorv1alpha1.SuspendPatchAnnotation) })
	testenv.Eventually(t, "the shoot following the Cluster once patching resumes", 30*time.Second, func() bool { return maximum() == 4 })

	// By hand, behind the operator's back: the hash still matches, so it stays.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := getShoot(shootName)
		if err != nil {
			return err
		}
		workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
		workers[0].(map[string]any)["maximum"] = int64(7)
		_ = unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers")
		return mgmt.Client.Update(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the Shoot watch has brought the Cluster back by now
	if m := maximum(); m != 7 {
		t.Fatalf("the hand edit is gone without the force annotation (maximum %d): the test proves nothing", m)
	}
	changeCluster(t, name, func(c *operatorv1alpha1.Cluster) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, operatorv1alpha1.ForcePatchAnnotation, "true")
	})
	testenv.Eventually(t, "the shoot written again and the annotation removed", 30*time.Second, func() bool {
		_, forced := getCluster(t, name).Annotations[operatorv1alpha1.ForcePatchAnnotation]
		return maximum() == 4 && !forced
	})
}

// changeCluster changes the Cluster name with change, retrying conflicts.
func changeCluster(t *testing.T, name string, change func(*operatorv1alpha1.Cluster)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := getCluster(t, name)
		change(c)
		return mgmt.Client.Update(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
}
