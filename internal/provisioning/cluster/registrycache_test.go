package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// TestRegistryCacheConfiguredFollowsGardener: RegistryCacheConfigured is True once
// Gardener reconciled the Shoot's current generation and succeeded, False when that
// operation failed, Unknown while Gardener has not reconciled the generation with the
// caches, and gone with the last cache.
func TestRegistryCacheConfiguredFollowsGardener(t *testing.T) {
	live := func(generation, observed int64, state string) *unstructured.Unstructured {
		s := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": observed,
			"lastOperation": map[string]any{"type": "Reconcile", "state": state, "progress": int64(100)}}}}
		s.SetName("s1")
		s.SetGeneration(generation)
		return s
	}
	for _, tc := range []struct {
		name   string
		shoot  *unstructured.Unstructured
		caches bool
		want   metav1.ConditionStatus
		reason string
	}{
		{"reconciled", live(3, 3, "Succeeded"), true, metav1.ConditionTrue, operatorv1alpha1.ReasonRegistryCacheConfigured},
		{"an older generation reconciled", live(4, 3, "Succeeded"), true, metav1.ConditionUnknown, operatorv1alpha1.ReasonRegistryCachePending},
		{"reconciling", live(4, 4, "Processing"), true, metav1.ConditionUnknown, operatorv1alpha1.ReasonRegistryCachePending},
		{"failed, retried", live(4, 4, "Error"), true, metav1.ConditionFalse, operatorv1alpha1.ReasonRegistryCacheConfigurationFailed},
		{"failed for good", live(4, 4, "Failed"), true, metav1.ConditionFalse, operatorv1alpha1.ReasonRegistryCacheConfigurationFailed},
		{"no caches", live(3, 3, "Succeeded"), false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
			c.Status.Conditions = []metav1.Condition{{Type: operatorv1alpha1.ConditionRegistryCacheConfigured, Status: metav1.ConditionTrue, Reason: "Old"}}
			if tc.caches {
				c.Spec.RegistryCache = []operatorv1alpha1.RegistryCache{{Upstream: "docker.io"}}
			}
			reportRegistryCache(c, tc.shoot)
			got := meta.FindStatusCondition(c.Status.Conditions, operatorv1alpha1.ConditionRegistryCacheConfigured)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("condition %+v kept without caches", got)
			case tc.want != "" && (got == nil || got.Status != tc.want || got.Reason != tc.reason):
				t.Errorf("condition %+v, want %s %s", got, tc.want, tc.reason)
			}
		})
	}
}
