package e2e

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
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

const operatorsNamespace = "e2e-operators"

// testOperatorsReport: the manager's cluster, kubeconfig and subscription controllers,
// under its own ServiceAccount, serve a brought-along Cluster (this API server), issue a
// kubeconfig for it, and keep a SubscriptionRequest waiting on the empty Secret pool; a
// Secret with an unusable version is left out of the checksums. Their series are what
// the alerts and the dashboard read (testQueriedMetricsAreExported).
func testOperatorsReport(t *testing.T) {
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorsNamespace}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "target-admin"},
		Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}})
	create(t, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "target"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "target-admin"}}})
	create(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}})
	create(t, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "waiting"},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "unversioned-tls-1",
		Annotations: map[string]string{checksum.DefaultVersionAnnotation: "not-a-number"}}, Type: corev1.SecretTypeOpaque})

	ready := func(obj interface {
		client.Object
		GetConditions() []metav1.Condition
	}, condition, reason string) func() bool {
		return func() bool {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false
			}
			c := meta.FindStatusCondition(obj.GetConditions(), condition)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}
	at := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: operatorsNamespace, Name: name}
	}
	testenv.Eventually(t, "the brought-along Cluster Ready", 60*time.Second,
		ready(&operatorv1alpha1.Cluster{ObjectMeta: at("target")}, conditions.Ready, operatorv1alpha1.ReasonAdministratorsBound))
	testenv.Eventually(t, "the kubeconfig issued", 60*time.Second,
		ready(&operatorv1alpha1.KubeconfigRequest{ObjectMeta: at("reader")}, conditions.Ready, operatorv1alpha1.ReasonIssued))
	testenv.Eventually(t, "the SubscriptionRequest waiting on the empty pool", 60*time.Second,
		ready(&cp.SubscriptionRequest{ObjectMeta: at("waiting")}, conditions.Reconciling, cp.ReasonPoolExhausted))
}
