package podcertsigner

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trustplane/trustplane/api/certificates"
)

// TestMismatchSaysWhich: a request denied because its pod, service account or node is not
// the one it names says which field, and both values, in the Denied message; the reasons
// stay PodMismatch and NodeMismatch.
func TestMismatchSaysWhich(t *testing.T) {
	node, pod := world(t, "signer-which")
	otherNode, _ := world(t, "signer-which-other")
	r := &Reconciler{Client: env.Client, APIReader: env.Client, opts: DefaultOptions()}
	base := certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace},
		Spec: certificatesv1.PodCertificateRequestSpec{PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: "web", NodeName: types.NodeName(node.Name), NodeUID: node.UID}}
	podRef := pod.Namespace + "/" + pod.Name
	for name, tc := range map[string]struct {
		mutate func(*certificatesv1.PodCertificateRequestSpec)
		reason string
		want   []string
	}{
		"pod UID": {func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "0000" }, certificates.ReasonPodMismatch,
			[]string{"spec.podUID", `"0000"`, podRef, `"` + string(pod.UID) + `"`}},
		"node name": {func(s *certificatesv1.PodCertificateRequestSpec) {
			s.NodeName, s.NodeUID = types.NodeName(otherNode.Name), otherNode.UID
		}, certificates.ReasonPodMismatch, []string{"spec.nodeName", `"` + otherNode.Name + `"`, podRef, `"` + node.Name + `"`}},
		"service account": {func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "admin" }, certificates.ReasonPodMismatch,
			[]string{"spec.serviceAccountName", `"admin"`, podRef, `runs as "web"`}},
		"node UID": {func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "1111" }, certificates.ReasonNodeMismatch,
			[]string{"spec.nodeUID", `"1111"`, node.Name, `"` + string(node.UID) + `"`, "replaced"}},
	} {
		pcr := base.DeepCopy()
		tc.mutate(&pcr.Spec)
		_, denial, err := r.checkPod(ctx, pcr)
		if err != nil || denial == nil {
			t.Fatalf("%s: not denied (%v)", name, err)
		}
		if denial.Reason != tc.reason {
			t.Errorf("%s: reason %s, want %s", name, denial.Reason, tc.reason)
		}
		for _, w := range tc.want {
			if !strings.Contains(denial.Message, w) {
				t.Errorf("%s: message %q does not say %s", name, denial.Message, w)
			}
		}
	}
}
