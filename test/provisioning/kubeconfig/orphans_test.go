package kubeconfig_test

// Tests of the sweep of what KubeconfigRequests that no longer exist left in a target
// (clustertarget.SweepOrphans): the controller kubeconfig-orphans for live Clusters, the
// Cluster controller for a brought-along Cluster being deleted.

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// sweptEvent waits for the Cluster's OrphansDeleted event naming want.
func sweptEvent(t *testing.T, namespace, cluster, want string) {
	t.Helper()
	testenv.Eventually(t, "an OrphansDeleted event on Cluster "+cluster, 30*time.Second, func() bool {
		list := &eventsv1.EventList{}
		if err := mgmt.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Name == cluster && e.Reason == operatorv1alpha1.ReasonOrphansDeleted && strings.Contains(e.Note, want) {
				return true
			}
		}
		return false
	})
}

// A request deleted without its finalizer (forced by an administrator, or by a tenant
// where the admission policy trustplane-finalizers is not installed) leaves its grants;
// its deletion brings its Cluster's sweep, which deletes them, and its token stops
// working. A request of the same namespace that still exists keeps everything.
func TestGrantsOfARequestDeletedWithoutItsFinalizerAreSwept(t *testing.T) {
	setup(t)
	createAll(t, roleRequest(ns, "forced", "target"), roleRequest(ns, "kept", "target"))
	deletedAtTheEnd(t, "kept")
	forced := waitReady(t, "forced", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	waitReady(t, "kept", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	token := forced.Status.Kubeconfig
	if user := tokenUser(t, token); user == "" {
		t.Fatal("the issued token does not work to begin with")
	}
	keptBefore := held(t, target.Client, ns, "kept")

	forceDelete(t, []client.Object{forced})
	waitHeld(t, target.Client, ns, "forced")
	sweptEvent(t, ns, "target", "ServiceAccount "+kubeconfigctrl.TargetNamespace+"/"+forced.Status.TargetName)
	testenv.Eventually(t, "the swept request's token rejected", 30*time.Second, func() bool { return tokenUser(t, token) == "" })
	if got := held(t, target.Client, ns, "kept"); strings.Join(got, ",") != strings.Join(keptBefore, ",") {
		t.Errorf("the request that exists holds %v, had %v", got, keptBefore)
	}
}

// What requests deleted while the manager was away left is swept when it starts (every
// Cluster is swept once): here a cross-namespace grant's request, deleted without its
// finalizer, and the namespace then no longer granted. Objects of another Cluster on the
// same API server (its UID label) are not this Cluster's to sweep.
func TestGrantsLeftWhileTheManagerWasAwayAreSweptAtStart(t *testing.T) {
	stop := setup(t)
	const clusterNS = "sweep-platform"
	createNamespace(t, mgmt.Client, clusterNS)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "sweep-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "sweep"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}, KubeconfigRequestNamespaces: []string{ns}}}
	kr := roleRequest(ns, "away", "sweep")
	kr.Spec.ClusterNamespace = clusterNS
	createAll(t, secret, cluster, kr)
	issued := waitReady(t, "away", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	if len(held(t, target.Client, ns, "away")) == 0 {
		t.Fatal("nothing granted to begin with")
	}

	stop()
	forceDelete(t, []client.Object{issued})
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.KubeconfigRequestNamespaces = nil
	if err := mgmt.Client.Patch(ctx, cluster, patch); err != nil {
		t.Fatal(err)
	}
	if got := held(t, target.Client, ns, "away"); len(got) == 0 {
		t.Fatal("the grants went with the manager stopped: the test shows nothing")
	}
	// Granted through a Cluster of another management cluster, to a request unknown here.
	foreign := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kubeconfigctrl.TargetNamespace, Name: "kcr-default-ghost-foreign",
		Labels: map[string]string{kubeconfigctrl.RequestUIDLabel: "5f0e6c1e-0000-4000-8000-000000000001", kubeconfigctrl.ClusterUIDLabel: "5f0e6c1e-0000-4000-8000-000000000002",
			kubeconfigctrl.RequestNamespaceLabel: ns, kubeconfigctrl.RequestLabel: "kcr-default-ghost-foreign"},
		Annotations: map[string]string{kubeconfigctrl.RequestAnnotation: ns + "/ghost"}}}
	if err := target.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Client.Delete(ctx, foreign) }()

	runController(t)
	waitHeld(t, target.Client, ns, "away")
	sweptEvent(t, clusterNS, "sweep", issued.Status.TargetName)
	if err := target.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Errorf("another Cluster's object: %v", err)
	}
	if err := mgmt.Client.Delete(ctx, cluster); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
	testenv.Eventually(t, "the Cluster gone", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	})
}

// A brought-along Cluster being deleted sweeps its cluster before it goes (the cluster
// outlives it): here with the Cluster controller alone, and an object granted through the
// Cluster to a request that does not exist.
func TestADeletedBroughtAlongClusterSweepsItsCluster(t *testing.T) {
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		_, err := clusterctrl.Setup(mgr, clusterctrl.DefaultOptions())
		return err
	})
	const clusterNS = "sweep-deleted"
	createNamespace(t, mgmt.Client, clusterNS)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "going"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}}}
	createAll(t, secret, cluster)
	testenv.Eventually(t, "the Cluster's finalizer", 30*time.Second, func() bool {
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster) == nil && len(cluster.Finalizers) > 0
	})
	if err := target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeconfigctrl.TargetNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	left := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kubeconfigctrl.TargetNamespace, Name: "kcr-sweep-deleted-gone",
		Labels: map[string]string{kubeconfigctrl.RequestUIDLabel: "5f0e6c1e-0000-4000-8000-000000000003", kubeconfigctrl.ClusterUIDLabel: string(cluster.UID),
			kubeconfigctrl.RequestNamespaceLabel: clusterNS, kubeconfigctrl.RequestLabel: "kcr-sweep-deleted-gone"},
		Annotations: map[string]string{kubeconfigctrl.RequestAnnotation: clusterNS + "/gone"}}}
	if err := target.Client.Create(ctx, left); err != nil {
		t.Fatal(err)
	}

	if err := mgmt.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster gone", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &operatorv1alpha1.Cluster{}))
	})
	if err := target.Client.Get(ctx, client.ObjectKeyFromObject(left), left); !apierrors.IsNotFound(err) {
		t.Errorf("the object of a request that does not exist is still in the cluster: %v", err)
	}
	sweptEvent(t, clusterNS, "going", "ServiceAccount "+kubeconfigctrl.TargetNamespace+"/"+left.Name)
}
