package cluster_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestOperatorMetrics: what the cluster, kubeconfig and subscription controllers export
// for the alerts (docs/operations.md): a Cluster's conditions and ClusterProvisioned, when
// a published kubeconfig is due for rotation and expires, a SubscriptionRequest waiting on
// an exhausted pool; every series goes with its object.
func TestOperatorMetrics(t *testing.T) {
	runOperators(t, false)
	objectLabels := func(kind, name string) map[string]string {
		return map[string]string{"kind": kind, "namespace": ns, "name": name}
	}
	ownLabels := func(name string) map[string]string { return map[string]string{"namespace": ns, "name": name} }
	waitValue := func(metric string, labels map[string]string, want float64) {
		t.Helper()
		testenv.Eventually(t, metric+" to be set", 30*time.Second, func() bool {
			v, ok := testenv.MetricValue(t, metric, labels)
			return ok && v == want
		})
	}
	waitGone := func(metric string, labels map[string]string) {
		t.Helper()
		testenv.Eventually(t, metric+" to go with its object", 30*time.Second, func() bool {
			_, ok := testenv.MetricValue(t, metric, labels)
			return !ok
		})
	}

	// A brought-along Cluster: provisioned and Ready.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-admin"}, Data: map[string][]byte{"kubeconfig": shootEnv.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}}}
	for _, obj := range []client.Object{secret, cluster} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, cluster.Name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	waitValue("trustplane_cluster_provisioned", ownLabels(cluster.Name), 1)
	waitValue("trustplane_object_ready", objectLabels("Cluster", cluster.Name), 1)
	waitValue("trustplane_object_reconciling", objectLabels("Cluster", cluster.Name), 0)
	waitValue("trustplane_object_stalled", objectLabels("Cluster", cluster.Name), 0)

	// A KubeconfigRequest for it: when its kubeconfig is due for rotation (two thirds into
	// its life, the default) and when it expires.
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster.Name, Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the kubeconfig issued", 30*time.Second, func() bool {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			t.Fatal(err)
		}
		return meta.IsStatusConditionTrue(kr.Status.Conditions, conditions.Ready) && kr.Status.ExpirationTimestamp != nil && kr.Status.IssuedAt != nil
	})
	issued, expires := kr.Status.IssuedAt.Time, kr.Status.ExpirationTimestamp.Time
	rotateAt := issued.Add(time.Duration(float64(expires.Sub(issued)) * 2 / 3))
	waitValue("trustplane_kubeconfig_expiration_timestamp_seconds", ownLabels(kr.Name), float64(expires.Unix()))
	waitValue("trustplane_kubeconfig_rotation_due_timestamp_seconds", ownLabels(kr.Name), float64(rotateAt.Unix()))
	waitValue("trustplane_object_ready", objectLabels("KubeconfigRequest", kr.Name), 1)

	// Revoked: Ready=False on its own request, neither reconciling nor stalled, and no
	// kubeconfig to rotate.
	kr.Annotations = map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}
	if err := mgmt.Client.Update(ctx, kr); err != nil {
		t.Fatal(err)
	}
	waitValue("trustplane_object_ready", objectLabels("KubeconfigRequest", kr.Name), 0)
	waitValue("trustplane_object_reconciling", objectLabels("KubeconfigRequest", kr.Name), 0)
	waitValue("trustplane_object_stalled", objectLabels("KubeconfigRequest", kr.Name), 0)
	waitGone("trustplane_kubeconfig_rotation_due_timestamp_seconds", ownLabels(kr.Name))
	waitGone("trustplane_kubeconfig_expiration_timestamp_seconds", ownLabels(kr.Name))

	// A SubscriptionRequest on an empty pool waits (PoolExhausted) until a credential comes.
	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-pool"},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}}
	if err := mgmt.Client.Create(ctx, sr); err != nil {
		t.Fatal(err)
	}
	waitValue("trustplane_subscription_pool_exhausted", ownLabels(sr.Name), 1)
	waitValue("trustplane_object_ready", objectLabels("SubscriptionRequest", sr.Name), 0)
	waitValue("trustplane_object_reconciling", objectLabels("SubscriptionRequest", sr.Name), 1)
	poolSecret(t, "metrics-aws-1", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true"})
	waitValue("trustplane_subscription_pool_exhausted", ownLabels(sr.Name), 0)
	waitValue("trustplane_object_ready", objectLabels("SubscriptionRequest", sr.Name), 1)

	// Deleted: every series goes.
	for _, obj := range []client.Object{kr, sr} {
		if err := mgmt.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	waitGone("trustplane_object_ready", objectLabels("KubeconfigRequest", kr.Name))
	waitGone("trustplane_object_ready", objectLabels("SubscriptionRequest", sr.Name))
	waitGone("trustplane_subscription_pool_exhausted", ownLabels(sr.Name))
	if err := mgmt.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	for _, metric := range []string{"trustplane_object_ready", "trustplane_object_reconciling", "trustplane_object_stalled"} {
		waitGone(metric, objectLabels("Cluster", cluster.Name))
	}
	waitGone("trustplane_cluster_provisioned", ownLabels(cluster.Name))
}
