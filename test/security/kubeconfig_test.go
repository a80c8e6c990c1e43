package security

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("ask for a kubeconfig through a known escalation route, or one that never expires", escalationRoutes)
}

// escalationRoutes: KubeconfigRequests for the RBAC good-practice escalation routes, and
// one for 90 days, are denied before anything is issued (the ceiling is checked before the
// Cluster is even looked at).
func escalationRoutes(t *testing.T, alice *tenant) {
	clusterWide := func(group, resource, verb string) operatorv1alpha1.KubeconfigRequestSpec {
		return operatorv1alpha1.KubeconfigRequestSpec{Cluster: "any", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}}}}}
	}
	requests := map[string]struct {
		spec       operatorv1alpha1.KubeconfigRequestSpec
		reason, in string
	}{
		"nodes-proxy": {clusterWide("", "nodes/proxy", "get"), operatorv1alpha1.ReasonDenied, "nodes-proxy"},
		"kube-system-exec": {operatorv1alpha1.KubeconfigRequestSpec{Cluster: "any", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: "kube-system",
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}}}},
			operatorv1alpha1.ReasonDenied, "pods-exec"},
		"csr-approval": {clusterWide("certificates.k8s.io", "signers", "approve"), operatorv1alpha1.ReasonDenied, "csr-approval"},
		"webhooks":     {clusterWide("admissionregistration.k8s.io", "validatingwebhookconfigurations", "create"), operatorv1alpha1.ReasonDenied, "admission-webhooks"},
		"pvs":          {clusterWide("", "persistentvolumes", "create"), operatorv1alpha1.ReasonDenied, "persistentvolumes"},
		// Issue 21: kube-controller-manager approves a node's client certificate for whoever
		// may create these subresources. The first is the request, as it was issued.
		"nodeclient": {operatorv1alpha1.KubeconfigRequestSpec{Cluster: "any", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests", "certificatesigningrequests/nodeclient"}, Verbs: []string{"create"}}}}},
			operatorv1alpha1.ReasonDenied, `route "csr-nodeclient"`},
		"selfnodeclient":       {clusterWide("certificates.k8s.io", "certificatesigningrequests/selfnodeclient", "create"), operatorv1alpha1.ReasonDenied, `route "csr-selfnodeclient"`},
		"csr-subresources":     {clusterWide("certificates.k8s.io", "certificatesigningrequests/*", "create"), operatorv1alpha1.ReasonDenied, `route "csr-nodeclient"`},
		"nodeclient-any-group": {clusterWide("*", "*/nodeclient", "create"), operatorv1alpha1.ReasonDenied, `route "csr-nodeclient"`},
		"ninety-days": {operatorv1alpha1.KubeconfigRequestSpec{Cluster: "any", Expiration: 90 * 24 * 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: "team",
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}},
			operatorv1alpha1.ReasonExpirationTooLong, "--kubeconfig-max-expiration"},
	}
	for name, r := range requests {
		mustCreate(t, alice.client, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: name}, Spec: r.spec})
	}
	for name, r := range requests {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		testenv.Eventually(t, name+" denied with "+r.reason, 30*time.Second, func() bool {
			if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name}, kr); err != nil {
				return false
			}
			c := meta.FindStatusCondition(kr.Status.Conditions, "Stalled")
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == r.reason
		})
		if c := meta.FindStatusCondition(kr.Status.Conditions, "Stalled"); !strings.Contains(c.Message, r.in) {
			t.Errorf("%s: message %q does not name %s", name, c.Message, r.in)
		}
		if kr.Status.IssuedAt != nil || kr.Status.GrantedIn != nil {
			t.Errorf("%s: something was issued: %+v", name, kr.Status)
		}
	}
}
