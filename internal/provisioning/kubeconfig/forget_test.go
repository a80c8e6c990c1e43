package kubeconfig

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The controller as Setup wires it drops a deleted Cluster's connection (its credentials,
// its sockets): the Cluster watch calls Connections.Forget.
func TestADeletedClusterLeavesTheConnectionCache(t *testing.T) {
	ctx := context.Background()
	var r *Reconciler
	env.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(ctx, mgr); err != nil {
			return err
		}
		var err error
		r, err = Setup(mgr, DefaultOptions())
		return err
	})
	const namespace = "default"
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "forgotten-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "forgotten"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: admin.Name}}}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "forgotten"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster.Name, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: namespace, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	for _, obj := range []client.Object{admin, cluster, kr} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = env.Client.Delete(ctx, kr) }()
	testenv.Eventually(t, "a connection to the Cluster", 30*time.Second, func() bool { return r.targets.Connected(cluster.UID) })
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the connection forgotten", 30*time.Second, func() bool { return !r.targets.Connected(cluster.UID) })
}
