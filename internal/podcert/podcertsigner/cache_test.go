package podcertsigner

import (
	"context"
	"errors"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trustplane/trustplane/api/certificates"
)

// unreachable is an API server the test must not need.
type unreachable struct{ client.Reader }

func (unreachable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("read from the API server")
}

// TestCacheAllowsButNeverDenies: a request the cache allows is checked without the API
// server; one the cache would deny (a pod or node it has not seen, or a replaced one) is
// denied only when the API server says the same.
func TestCacheAllowsButNeverDenies(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-2"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-2"},
		Spec: corev1.PodSpec{NodeName: "n", ServiceAccountName: "web"}}
	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req"},
		Spec: certificatesv1.PodCertificateRequestSpec{PodName: "web", PodUID: "pod-2", NodeName: types.NodeName("n"), NodeUID: "node-2", ServiceAccountName: "web"}}
	stale := func(objs ...client.Object) client.Reader { return fake.NewClientBuilder().WithObjects(objs...).Build() }
	oldPod, oldNode := pod.DeepCopy(), node.DeepCopy()
	oldPod.UID, oldNode.UID = "pod-1", "node-1"

	for _, tc := range []struct {
		name         string
		cached, live client.Reader
		want         string // the denial's reason; "" issues
	}{
		{"cache allows: no API read", stale(pod, node), unreachable{}, ""},
		{"pod and node not cached yet", stale(), stale(pod, node), ""},
		{"replaced pod and node still cached", stale(oldPod, oldNode), stale(pod, node), ""},
		{"pod gone in both", stale(node), stale(node), certificates.ReasonPodNotFound},
		{"pod replaced in both", stale(oldPod, node), stale(oldPod, node), certificates.ReasonPodMismatch},
		{"node replaced in both", stale(pod, oldNode), stale(pod, oldNode), certificates.ReasonNodeMismatch},
		{"no cache", nil, stale(pod, node), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Cached: tc.cached, APIReader: tc.live}
			_, denial, err := r.checkPod(context.Background(), pcr)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && denial != nil:
				t.Fatalf("denied: %v", denial)
			case tc.want != "" && (denial == nil || denial.Reason != tc.want):
				t.Fatalf("denial %v, want reason %s", denial, tc.want)
			}
		})
	}
}
