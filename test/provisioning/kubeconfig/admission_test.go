package kubeconfig_test

// Tests of the admission policy trustplane-kubeconfig-requests (config/policy): as a
// request is created, the API server writes the controller's finalizer and the record of
// the Cluster it names, so the controller grants with no write of its own first, and what
// it grants before its first status is stored is still found and withdrawn.

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
)

// installPolicies installs the shipped admission policies for the test and removes them
// after it.
func installPolicies(t *testing.T) {
	t.Helper()
	if err := mgmt.InstallPolicies(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgmt.RemovePolicies(ctx, ns); err != nil {
			t.Error(err)
		}
	})
}

// The record is the API server's, whatever the creator wrote, and only the manager's
// identity may change it afterwards: a tenant who may update the request may not.
func TestAdmissionRecordsTheClusterAtCreation(t *testing.T) {
	installPolicies(t)
	setup(t)
	kr := roleRequest(ns, "recorded", "target")
	kr.Annotations = map[string]string{operatorv1alpha1.ClusterAtCreationAnnotation: "elsewhere/forged"}
	createAll(t, kr)
	defer deletedAtTheEnd(t, kr.Name)
	if !slices.Contains(kr.Finalizers, kubeconfigctrl.Finalizer.Name) {
		t.Errorf("finalizers %v: want %s written at creation", kr.Finalizers, kubeconfigctrl.Finalizer.Name)
	}
	if got, want := kr.Annotations[operatorv1alpha1.ClusterAtCreationAnnotation], ns+"/target"; got != want {
		t.Errorf("record at creation %q, want %q", got, want)
	}

	tenant := tenantClient(t, "mallory")
	for _, value := range []string{"elsewhere/forged", ""} {
		edited := &operatorv1alpha1.KubeconfigRequest{}
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(kr), edited); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(edited.Annotations, operatorv1alpha1.ClusterAtCreationAnnotation)
		} else {
			edited.Annotations[operatorv1alpha1.ClusterAtCreationAnnotation] = value
		}
		if err := tenant.Update(ctx, edited); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("a tenant set the record to %q: %v", value, err)
		}
	}
	// Everything else stays the tenant's to change.
	edited := &operatorv1alpha1.KubeconfigRequest{}
	if err := tenant.Get(ctx, client.ObjectKeyFromObject(kr), edited); err != nil {
		t.Fatal(err)
	}
	edited.Annotations[operatorv1alpha1.RotateAnnotation] = "false"
	if err := tenant.Update(ctx, edited); err != nil {
		t.Errorf("a tenant's own annotation refused: %v", err)
	}
}

// tenantClient is a client acting as user, who may read and update KubeconfigRequests in
// the test namespace (as a tenant setting rotate or revoke does) and nothing else.
func tenantClient(t *testing.T, user string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-tenant-" + user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{operatorv1alpha1.GroupVersion.Group}, Resources: []string{"kubeconfigrequests"},
			Verbs: []string{"get", "list", "watch", "update", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := mgmt.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	return mgmt.As(t, user)
}

// With the record made at creation the controller writes nothing before it grants, so a
// request whose status is never stored (here every status write is refused; in life, the
// manager dying before its status write) holds grants no status names. They are still
// withdrawn when the request moves to another Cluster and when it is deleted.
func TestGrantsMadeBeforeAnyStatusAreWithdrawn(t *testing.T) {
	installPolicies(t)
	setup(t)
	const name = "nostatus"
	lift := refuseStatus(t, name, "false")
	defer lift()
	kr := roleRequest(ns, name, "target")
	createAll(t, kr)
	waitHeld(t, target.Client, ns, name, "ServiceAccount trustplane-kubeconfigs", "Role team", "RoleBinding team")
	stored := &operatorv1alpha1.KubeconfigRequest{}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		t.Fatal(err)
	}
	if stored.StatusStored() {
		t.Fatalf("a status was stored (%+v): the test shows nothing", stored.Status)
	}

	// Moved to a Cluster that is not there: what it holds in the first one goes.
	patch := client.MergeFrom(stored.DeepCopy())
	stored.Spec.Cluster = "not-there"
	if err := mgmt.Client.Patch(ctx, stored, patch); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, target.Client, ns, name)

	// Granted again once it names the Cluster again, then deleted: nothing stays.
	patch = client.MergeFrom(stored.DeepCopy())
	stored.Spec.Cluster = "target"
	if err := mgmt.Client.Patch(ctx, stored, patch); err != nil {
		t.Fatal(err)
	}
	lift()
	waitReady(t, name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	if err := mgmt.Client.Delete(ctx, stored); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request gone", func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), &operatorv1alpha1.KubeconfigRequest{}))
	})
	if got := held(t, target.Client, ns, name); len(got) != 0 {
		t.Errorf("left in the target by the deleted request: %v", got)
	}
}

// The record made at creation outlives the first status stored: a request that granted
// with no status stored (the manager died before its status write) and then stored one
// before granting again (its Cluster's kubeconfig Secret gone) still withdraws its grants
// when deleted. Before, that status dropped the record, and the deletion left the
// ServiceAccount and roles in the target (the chaos suite, seed 470548950931556388).
func TestTheCreationRecordOutlivesAStatusStoredBeforeGranting(t *testing.T) {
	installPolicies(t)
	setup(t)
	const cluster, name = "carried", "carried-req"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "carried-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	createAll(t, secret.DeepCopy(), &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}}})
	lift := refuseStatus(t, name, "false")
	defer lift()
	kr := roleRequest(ns, name, cluster)
	createAll(t, kr)
	waitHeld(t, target.Client, ns, name, "ServiceAccount trustplane-kubeconfigs", "Role team", "RoleBinding team")

	if err := mgmt.Client.Delete(ctx, secret.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	lift()
	stored := &operatorv1alpha1.KubeconfigRequest{}
	waitFor(t, "a status stored without granting", func() bool {
		c := meta.FindStatusCondition(stored.Status.Conditions, "Ready")
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), stored) == nil && c != nil && c.Reason == operatorv1alpha1.ReasonClusterNotReady
	})
	if g := stored.Status.GrantedIn; g == nil || g.Name != cluster {
		t.Errorf("status.grantedIn %+v, want Cluster %s (where admission recorded the grants may live)", g, cluster)
	}

	if err := mgmt.Client.Delete(ctx, stored); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the deletion waits for a way into the cluster
	if err := mgmt.Client.Create(ctx, secret.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request gone", func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), &operatorv1alpha1.KubeconfigRequest{}))
	})
	if got := held(t, target.Client, ns, name); len(got) != 0 {
		t.Errorf("left in the target by the deleted request: %v", got)
	}
}
