package cluster_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestOneConnectionPerCluster: the cluster and kubeconfig controllers, handed one
// connection cache as the manager's assembly hands it, reach a Cluster's cluster through
// one connection (one dial) — the cluster controller binding its administrators, the
// kubeconfig controller granting and issuing — and the connection is forgotten once the
// Cluster is deleted.
func TestOneConnectionPerCluster(t *testing.T) {
	ns = mgmt.Namespace(t, "shared")
	clusterOpts, kubeconfigOpts := clusterctrl.DefaultOptions(), kubeconfigctrl.DefaultOptions()
	var conns *clustertarget.Connections
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		conns = &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Policy: clusterOpts.Kubeconfig, Clock: clusterOpts.Clock}
		clusterOpts.Targets, kubeconfigOpts.Targets = conns, conns
		if _, err := clusterctrl.Setup(mgr, clusterOpts); err != nil {
			return err
		}
		_, err := kubeconfigctrl.Setup(mgr, kubeconfigOpts)
		return err
	})
	c := broughtAlong(t, ns, "shared", shootEnv.Environment().KubeConfig)
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared-reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: c.Name, Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c.Name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	testenv.Eventually(t, "the KubeconfigRequest issued", 30*time.Second, func() bool {
		got := &operatorv1alpha1.KubeconfigRequest{}
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, conditions.Ready)
	})
	if n := conns.Dials(c.UID); n != 1 {
		t.Errorf("%d connections made to Cluster %s by the two controllers, want 1", n, c.Name)
	}

	// Deleted (its request first): the connection goes with the Cluster.
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster gone", 30*time.Second, func() bool {
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c), &operatorv1alpha1.Cluster{}) != nil
	})
	testenv.Eventually(t, "the connection forgotten", 10*time.Second, func() bool { return !conns.Connected(c.UID) })
}
