package clustertarget

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/tenantkubeconfig"
)

// TestAForgottenClusterIsConnectedAfresh: a connection is cached per Cluster UID until the
// Cluster is forgotten (deleted), and only that Cluster's.
func TestAForgottenClusterIsConnectedAfresh(t *testing.T) {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t0ken}}]
`)
	var objs []*operatorv1alpha1.Cluster
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}); err != nil {
			t.Fatal(err)
		}
		cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: name + "-kubeconfig"}}}
		if err := c.Create(ctx, cluster); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, cluster)
	}
	conns := &Connections{Client: c, APIReader: c, Policy: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
	first := map[string]*Target{}
	for _, cluster := range objs {
		target, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: cluster.Name})
		if err != nil {
			t.Fatal(err)
		}
		first[cluster.Name] = target
	}
	if conns.Len() != 2 {
		t.Fatalf("%d connections cached, want 2", conns.Len())
	}
	conns.Forget(objs[0].UID)
	if conns.Len() != 1 {
		t.Errorf("%d connections cached after forgetting one, want 1", conns.Len())
	}
	again, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: "b"})
	if err != nil || again != first["b"] {
		t.Errorf("the other Cluster's connection was not kept: %v", err)
	}
	if again, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: "a"}); err != nil || again == first["a"] {
		t.Errorf("a forgotten Cluster's connection was reused: %v", err)
	}
}
