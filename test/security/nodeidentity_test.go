package security

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("be issued a kubeconfig whose certificate requests kube-controller-manager approves as a node's", nodeIdentity)
}

// nodeIdentity (issue 21): the platform lends alice's namespace a Cluster (this API server,
// brought along with an admin kubeconfig). There, creating plain certificate signing
// requests is issued, so the Cluster does issue; but the request — create on
// certificatesigningrequests and certificatesigningrequests/nodeclient, which
// kube-controller-manager's csrapproving controller takes as leave to approve a client
// certificate for any node — is Denied naming csr-nodeclient, and no ServiceAccount, role
// or binding is made for it in the target.
func nodeIdentity(t *testing.T, alice *tenant) {
	const platform = "platform-clusters"
	mustCreate(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platform}})
	mustCreate(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "shared-admin"},
		Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}})
	shared := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "shared"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "shared-admin"},
			KubeconfigRequestNamespaces: []string{alice.namespace}}}
	mustCreate(t, env.Client, shared)

	request := func(name string, resources ...string) *operatorv1alpha1.KubeconfigRequest {
		return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: name},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: shared.Name, ClusterNamespace: platform, Expiration: 3600,
				ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{
					{APIGroups: []string{"certificates.k8s.io"}, Resources: resources, Verbs: []string{"create"}}}}}}
	}
	nodeClient := request("node-client", "certificatesigningrequests", "certificatesigningrequests/nodeclient")
	plain := request("plain-csr", "certificatesigningrequests")
	mustCreate(t, alice.client, nodeClient)
	mustCreate(t, alice.client, plain)

	waitRequest(t, alice, plain, conditions.Ready, operatorv1alpha1.ReasonIssued)
	stalled := waitRequest(t, alice, nodeClient, conditions.Stalled, operatorv1alpha1.ReasonDenied)
	if !strings.Contains(stalled.Message, `route "csr-nodeclient"`) {
		t.Errorf("message %q does not name the route csr-nodeclient", stalled.Message)
	}
	if nodeClient.Status.IssuedAt != nil || nodeClient.Status.GrantedIn != nil || nodeClient.Status.Kubeconfig != "" {
		t.Errorf("node-client was issued: %+v", nodeClient.Status)
	}
	made := client.MatchingLabels{kubeconfigctrl.RequestNamespaceLabel: alice.namespace, kubeconfigctrl.RequestNameLabel: nodeClient.Name}
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := env.Client.List(ctx, list, made); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("%d %T made in the target for node-client", n, list)
		}
	}
}

// waitRequest waits until the request, as alice reads it, has condition cond True with
// reason, and returns that condition.
func waitRequest(t *testing.T, alice *tenant, kr *operatorv1alpha1.KubeconfigRequest, cond, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	testenv.Eventually(t, kr.Name+" "+cond+"=True/"+reason, 30*time.Second, func() bool {
		if err := alice.client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			return false
		}
		c := meta.FindStatusCondition(kr.Status.Conditions, cond)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return false
		}
		found = *c
		return true
	})
	return found
}
