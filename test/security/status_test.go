package security

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("hold another tenant's Cluster through a status she writes", forgeGrantedIn)
}

// forgeGrantedIn: status.grantedIn says which Cluster a KubeconfigRequest's grants live
// in, and a Cluster's deletion waits for the requests holding grants in it. alice may
// write her own requests, but their status is the manager's: the admission policy
// trustplane-status-writers refuses her forged status.grantedIn naming bob's Cluster, a
// status sent with a create is dropped, and bob's never-provisioned Cluster goes as soon
// as it is deleted. The manager itself writes statuses under the shipped RBAC, policy
// installed: alice's request reports it waits for its Cluster.
func forgeGrantedIn(t *testing.T, alice *tenant) {
	bobs := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: bobNamespace, Name: "dead"},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "europe-west3"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "gcp", MachineType: "n2-standard-4", AutoScalerMin: 1, AutoScalerMax: 3, NumberOfZones: 1},
			Administrators: []string{"bob@example.com"}}}
	mustCreate(t, env.Client, bobs)
	// No garden here: the manager keeps it, with its finalizer, as never provisioned.
	waitClusterSettled(t, bobs)

	pin := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "pin"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "pin", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: "team",
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}}}
	mustCreate(t, alice.client, pin)
	testenv.Eventually(t, "the manager to report that alice/pin waits for its Cluster", 30*time.Second, func() bool {
		if err := alice.client.Get(ctx, client.ObjectKeyFromObject(pin), pin); err != nil {
			return false
		}
		c := meta.FindStatusCondition(pin.Status.Conditions, conditions.Reconciling)
		return c != nil && c.Reason == operatorv1alpha1.ReasonClusterNotReady
	})

	// The policy was installed with config/default; the API server takes a moment to load
	// it. A status patch that changes nothing is refused once it is in force.
	testenv.Eventually(t, "the admission policy to refuse alice's status writes", 30*time.Second, func() bool {
		return alice.client.Status().Patch(ctx, pin.DeepCopy(), client.RawPatch(types.MergePatchType, []byte("{}"))) != nil
	})
	forged := pin.DeepCopy()
	forged.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: bobNamespace, Name: "dead"}
	err := alice.client.Status().Patch(ctx, forged, client.MergeFrom(pin))
	if err == nil {
		t.Fatal("alice wrote status.grantedIn of her KubeconfigRequest")
	}
	for _, want := range []string{"only the trustplane manager writes the status of kubeconfigrequests.operator.kyma-project.io", "trustplane.io"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	// The status of a create goes nowhere: the API server drops it.
	created := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "pin-created"},
		Spec: pin.Spec, Status: operatorv1alpha1.KubeconfigRequestStatus{GrantedIn: forged.Status.GrantedIn}}
	mustCreate(t, alice.client, created)
	for _, name := range []string{"pin", "pin-created"} {
		stored := &operatorv1alpha1.KubeconfigRequest{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: alice.namespace, Name: name}, stored); err != nil {
			t.Fatal(err)
		}
		// The manager records where the grants may live (the Cluster the request named at
		// creation); alice's forgery must be nowhere.
		if g := stored.Status.GrantedIn; g != nil && *g == *forged.Status.GrantedIn {
			t.Errorf("%s is stored with the forged status.grantedIn %+v", name, g)
		}
	}
	unchanged(t, bobs)

	if err := env.Client.Delete(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bob's Cluster to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(bobs), &operatorv1alpha1.Cluster{}))
	})
}

// waitClusterSettled waits until the manager has put its finalizer on the Cluster and
// reported it stalled (it writes nothing more until something changes).
func waitClusterSettled(t *testing.T, c *operatorv1alpha1.Cluster) {
	t.Helper()
	testenv.Eventually(t, "Cluster "+c.Namespace+"/"+c.Name+" stalled, with its finalizer", 30*time.Second, func() bool {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false
		}
		return len(c.Finalizers) > 0 && meta.IsStatusConditionTrue(c.Status.Conditions, conditions.Stalled) &&
			c.Status.ObservedGeneration == c.Generation
	})
}
