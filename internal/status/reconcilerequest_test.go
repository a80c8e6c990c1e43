package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

func TestReconcileRequested(t *testing.T) {
	with := func(value string) *jwksv1alpha1.JWKSConfig {
		c := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}}
		if value != "" {
			c.Annotations = map[string]string{conditions.ReconcileRequestedAnnotation: value}
		}
		return c
	}
	for _, tc := range []struct {
		old, cur string
		want     bool
	}{{"", "", false}, {"", "t1", true}, {"t1", "t1", false}, {"t1", "t2", true}, {"t1", "", true}} {
		if got := ReconcileRequested.Update(event.UpdateEvent{ObjectOld: with(tc.old), ObjectNew: with(tc.cur)}); got != tc.want {
			t.Errorf("%q → %q: %t, want %t", tc.old, tc.cur, got, tc.want)
		}
	}
	if ReconcileRequested.Create(event.CreateEvent{Object: with("t1")}) || ReconcileRequested.Delete(event.DeleteEvent{Object: with("t1")}) {
		t.Error("passes creations or deletions: GenerationChangedPredicate decides those")
	}

	c := with("t2")
	markReconcileHandled(c)
	if c.Status.LastHandledReconcileAt != "t2" {
		t.Errorf("lastHandledReconcileAt = %q", c.Status.LastHandledReconcileAt)
	}
	c = with("")
	c.Status.LastHandledReconcileAt = "t0"
	markReconcileHandled(c) // no request: the last one handled stays
	if c.Status.LastHandledReconcileAt != "t0" {
		t.Errorf("lastHandledReconcileAt = %q", c.Status.LastHandledReconcileAt)
	}
	before := c.DeepCopy()
	c.Annotations = map[string]string{conditions.ReconcileRequestedAnnotation: "t3"}
	markReconcileHandled(c)
	if patch, changed, err := statusMergePatch(before, c); err != nil || !changed || string(patch) != `{"status":{"lastHandledReconcileAt":"t3"}}` {
		t.Errorf("status patch %s %t %v", patch, changed, err)
	}
}
