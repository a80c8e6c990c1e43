package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The tenant kubeconfig policy is bound to its flags once and given to both controllers
// that read brought-along kubeconfigs. A kubeconfig that turns TLS verification off is
// refused by default; with --insecure-kubeconfig-tls the Cluster controller binds its
// administrators through it and the kubeconfig controller issues a kubeconfig through it.
// Either controller reading it under another policy would leave its object unready.
func TestTenantKubeconfigPolicyReachesClusterAndKubeconfigControllers(t *testing.T) {
	ns := env.Namespace(t, "policy")
	insecure, err := clientcmd.LoadFromFile(env.AdminKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range insecure.Clusters {
		c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true
	}
	raw, err := clientcmd.Write(*insecure)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "insecure"}, Data: map[string][]byte{"kubeconfig": raw}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "insecure"},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "insecure"}, Administrators: []string{"policy@example.com"}}},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "insecure", Expiration: 3600,
				ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}}}},
	} {
		create(t, obj)
	}
	testenv.StartProcess(t, testenv.Binary(t), "manager", "--kubeconfig="+env.AdminKubeconfig(t), "--controllers=cluster,kubeconfig",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address="+testenv.FreeAddr(t), "--insecure-kubeconfig-tls")
	for _, obj := range []client.Object{&operatorv1alpha1.Cluster{}, &operatorv1alpha1.KubeconfigRequest{}} {
		key := client.ObjectKey{Namespace: ns, Name: "insecure"}
		if _, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok {
			key.Name = "viewer"
		}
		testenv.Eventually(t, key.String()+" Ready", 60*time.Second, func() bool {
			if err := env.Client.Get(ctx, key, obj); err != nil {
				return false
			}
			return meta.IsStatusConditionTrue(obj.(conditions.Object).GetConditions(), conditions.Ready)
		})
	}
}
