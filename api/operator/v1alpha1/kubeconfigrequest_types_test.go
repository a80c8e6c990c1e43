package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusCountsOnlyWithinTheClustersGrant: a Cluster's spec says who may hold it;
// status.grantedIn is believed only within that grant, and outside it is a claim.
func TestStatusCountsOnlyWithinTheClustersGrant(t *testing.T) {
	cluster := &Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "shared"},
		Spec: ClusterSpec{KubeconfigRequestNamespaces: []string{"team"}}}
	request := func(namespace, clusterNamespace, cluster string, grantedIn *ClusterReference) *KubeconfigRequest {
		return &KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "r"},
			Spec:   KubeconfigRequestSpec{Cluster: cluster, ClusterNamespace: clusterNamespace},
			Status: KubeconfigRequestStatus{GrantedIn: grantedIn}}
	}
	here := &ClusterReference{Namespace: "platform", Name: "shared"}
	elsewhere := &ClusterReference{Namespace: "platform", Name: "other"}
	for _, tc := range []struct {
		name          string
		request       *KubeconfigRequest
		holds, claims bool
	}{
		{"granted namespace naming it", request("team", "platform", "shared", nil), true, false},
		{"its own namespace naming it", request("platform", "", "shared", nil), true, false},
		{"granted namespace, grants there, naming another", request("team", "platform", "other", here), true, false},
		{"granted namespace, grants elsewhere", request("team", "platform", "other", elsewhere), false, false},
		{"namespace not granted, naming it", request("alice", "platform", "shared", nil), false, false},
		{"namespace not granted, status says grants there", request("alice", "alice", "pin", here), false, true},
		{"namespace not granted, naming it, status says grants there", request("alice", "platform", "shared", here), false, true},
	} {
		if got := tc.request.Holds(cluster); got != tc.holds {
			t.Errorf("%s: Holds = %v, want %v", tc.name, got, tc.holds)
		}
		if got := tc.request.ClaimsGrantsIn(cluster); got != tc.claims {
			t.Errorf("%s: ClaimsGrantsIn = %v, want %v", tc.name, got, tc.claims)
		}
	}
}
