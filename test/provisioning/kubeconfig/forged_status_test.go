package kubeconfig_test

// Tests of a KubeconfigRequest status that names a Cluster which does not grant the
// request's namespace: a Cluster that stopped granting it while the request still holds
// grants there, or a forged status. Shipped installs refuse forged statuses at admission
// (the policy trustplane-status-writers, test/security); these tests run without it, as
// an install that left it out would, and write the status as whoever could.

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// kubeconfigAt is the target's admin kubeconfig with its server replaced by server.
func kubeconfigAt(t *testing.T, server string) []byte {
	t.Helper()
	parsed, err := clientcmd.Load(target.Environment().KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parsed.Clusters {
		c.Server = server
	}
	raw, err := clientcmd.Write(*parsed)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// setKubeconfig writes the kubeconfig Secret namespace/name.
func setKubeconfig(t *testing.T, namespace, name string, kubeconfig []byte) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	secret.Data = map[string][]byte{"kubeconfig": kubeconfig}
	switch {
	case apierrors.IsNotFound(err):
		err = mgmt.Client.Create(ctx, secret)
	case err == nil:
		err = mgmt.Client.Update(ctx, secret)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// forgeGrantedIn writes the request's status.grantedIn, as its author could without the
// admission policy.
func forgeGrantedIn(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest, in *operatorv1alpha1.Cluster) {
	t.Helper()
	before := kr.DeepCopy()
	kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: in.Namespace, Name: in.Name}
	if err := mgmt.Client.Status().Patch(ctx, kr, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// clusterReady is the Ready condition of a Cluster, nil once it is gone.
func clusterReady(t *testing.T, c *operatorv1alpha1.Cluster) *metav1.Condition {
	t.Helper()
	got := &operatorv1alpha1.Cluster{}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c), got); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, "Ready"); r != nil && len(got.Finalizers) > 0 {
		return r
	}
	return &metav1.Condition{}
}

// TestClusterIsNotHeldByRequestsItDoesNotGrant: requests of a namespace a Cluster does not
// grant, whose status says their grants live in it, never hold its deletion for good.
// Nothing withdraws them here (only the Cluster controller runs): an unprovisioned
// Gardener Cluster goes at once, its Shoot would take anything with it; a brought-along
// one, whose cluster outlives it, waits --cluster-deletion-cleanup-timeout for them, then
// goes with a Warning event naming them.
func TestClusterIsNotHeldByRequestsItDoesNotGrant(t *testing.T) {
	const grace = 4 * time.Second
	opts := clusterctrl.DefaultOptions()
	opts.DeletionCleanupTimeout = grace
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		_, err := clusterctrl.Setup(mgr, opts)
		return err
	})
	const platformNS, intruderNS = "platform-forged", "intruder-forged"
	createNamespace(t, mgmt.Client, platformNS)
	createNamespace(t, mgmt.Client, intruderNS)
	unprovisioned := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "unprovisioned"},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "europe-west3"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "gcp", MachineType: "n2-standard-4", AutoScalerMin: 1, AutoScalerMax: 3, NumberOfZones: 1}}}
	setKubeconfig(t, platformNS, "brought-admin", target.Environment().KubeConfig)
	brought := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "brought"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "brought-admin"}}}
	pin, pin2 := roleRequest(intruderNS, "pin", "pin"), roleRequest(intruderNS, "pin2", "pin2")
	createAll(t, unprovisioned, brought, pin, pin2)
	forgeGrantedIn(t, pin, unprovisioned)
	forgeGrantedIn(t, pin2, brought)
	for _, c := range []*operatorv1alpha1.Cluster{unprovisioned, brought} {
		testenv.Eventually(t, "Cluster "+c.Name+" reconciled, with its finalizer", 30*time.Second, func() bool {
			r := clusterReady(t, c)
			return r != nil && r.Reason != ""
		})
	}

	if err := mgmt.Client.Delete(ctx, unprovisioned); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the unprovisioned Cluster to go", 10*time.Second, func() bool { return clusterReady(t, unprovisioned) == nil })

	deleted := time.Now()
	if err := mgmt.Client.Delete(ctx, brought); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the brought-along Cluster to say what it waits for", grace, func() bool {
		r := clusterReady(t, brought)
		return r != nil && r.Reason == operatorv1alpha1.ReasonInUse && strings.Contains(r.Message, "intruder-forged/pin2") &&
			strings.Contains(r.Message, "no longer grants")
	})
	testenv.Eventually(t, "the brought-along Cluster to go", grace+20*time.Second, func() bool { return clusterReady(t, brought) == nil })
	if waited := time.Since(deleted); waited < grace-2*time.Second { // deletionTimestamp has whole seconds
		t.Errorf("the brought-along Cluster went after %v, before its cleanup timeout (%v)", waited, grace)
	}
	events := warningEvents(t, platformNS, "brought", operatorv1alpha1.ReasonCleanupAbandoned)
	if len(events) == 0 || !strings.Contains(events[0].Note, "intruder-forged/pin2") {
		t.Errorf("no Warning event %s naming intruder-forged/pin2: %+v", operatorv1alpha1.ReasonCleanupAbandoned, events)
	}
}

// TestClusterThatStoppedGrantingWaitsForTheWithdrawal: the case a status naming a Cluster
// that does not grant the request's namespace is there for. A Cluster stops granting a
// namespace while its target cannot be reached, and is deleted: its deletion waits for the
// request there to withdraw (within the cleanup timeout), which it does once the target
// answers again; nothing is left in the target.
func TestClusterThatStoppedGrantingWaitsForTheWithdrawal(t *testing.T) {
	runClusterAndKubeconfigControllers(t)
	createTarget(t)
	const clusterNS = "platform-leaving"
	createNamespace(t, mgmt.Client, clusterNS)
	setKubeconfig(t, clusterNS, "leaving-admin", target.Environment().KubeConfig)
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "leaving"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "leaving-admin"}, KubeconfigRequestNamespaces: []string{ns}}}
	kr := roleRequest(ns, "granted-then-not", "leaving")
	kr.Spec.ClusterNamespace = clusterNS
	createAll(t, cluster, kr)
	waitConditions(t, ns, kr.Name, "Ready=True/Issued")
	waitHeld(t, target.Client, ns, kr.Name, "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role team", "RoleBinding team")

	setKubeconfig(t, clusterNS, "leaving-admin", kubeconfigAt(t, "https://"+testenv.FreeAddr(t)))
	testenv.Eventually(t, "the request to find the target unreachable", 30*time.Second, func() bool {
		got := &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "Reconciling")
		return c != nil && c.Reason == operatorv1alpha1.ReasonTargetUnreachable
	})
	ungrant := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"kubeconfigRequestNamespaces":null}}`))
	if err := mgmt.Client.Patch(ctx, cluster, ungrant); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the kubeconfig withdrawn, with the grants in the target pending", 30*time.Second, func() bool {
		got := &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Kubeconfig == "" && got.Status.GrantedIn != nil
	})

	if err := mgmt.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster to wait for default/granted-then-not", 30*time.Second, func() bool {
		r := clusterReady(t, cluster)
		return r != nil && r.Reason == operatorv1alpha1.ReasonInUse && strings.Contains(r.Message, "default/granted-then-not")
	})
	setKubeconfig(t, clusterNS, "leaving-admin", target.Environment().KubeConfig)
	testenv.Eventually(t, "the Cluster to go", 60*time.Second, func() bool { return clusterReady(t, cluster) == nil })
	if got := held(t, target.Client, ns, kr.Name); len(got) != 0 {
		t.Errorf("left in the target: %v", got)
	}
}

// TestWithdrawalFromAClusterThatDoesNotGrantTellsNothingOfIt: a request whose status names
// another namespace's Cluster, which does not grant its namespace, makes the manager
// withdraw from there (only objects labelled for that request are deleted), but what
// happens there (the Cluster's server, its kubeconfig Secret) never reaches the request.
func TestWithdrawalFromAClusterThatDoesNotGrantTellsNothingOfIt(t *testing.T) {
	runController(t)
	const clusterNS, intruderNS = "platform-private", "intruder-nosy"
	createNamespace(t, mgmt.Client, clusterNS)
	createNamespace(t, mgmt.Client, intruderNS)
	unreachable := testenv.FreeAddr(t)
	setKubeconfig(t, clusterNS, "private-admin", kubeconfigAt(t, "https://"+unreachable))
	private := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "private"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "private-admin"}}}
	nosy := roleRequest(intruderNS, "nosy", "nosy")
	createAll(t, private, nosy)
	waitConditions(t, intruderNS, "nosy", "Ready=False/ClusterNotReady", "Reconciling=True/ClusterNotReady")
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(nosy), nosy); err != nil {
		t.Fatal(err)
	}
	forgeGrantedIn(t, nosy, private)
	// A status write brings no reconcile; an annotation does.
	patch := `{"metadata":{"annotations":{"example.com/touch":"1"}}}`
	if err := mgmt.Client.Patch(ctx, nosy, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}

	kr := waitConditions(t, intruderNS, "nosy", "Ready=False/WithdrawalPending", "Reconciling=True/WithdrawalPending")
	seen := ""
	for _, c := range kr.Status.Conditions {
		seen += c.Message + "\n"
	}
	for _, reason := range []string{"TargetNotCleanedUp", operatorv1alpha1.ReasonWithdrawalPending} {
		for _, e := range warningEvents(t, intruderNS, "nosy", reason) {
			seen += e.Note + "\n"
		}
	}
	if !strings.Contains(seen, "does not grant namespace "+intruderNS) {
		t.Errorf("the request does not say the Cluster does not grant its namespace: %s", seen)
	}
	for _, secret := range []string{unreachable, "private-admin"} {
		if strings.Contains(seen, secret) {
			t.Errorf("what the request reports names %q of someone else's Cluster: %s", secret, seen)
		}
	}
}
