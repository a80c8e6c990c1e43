package finalizer

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// An object carrying the legacy name gets the new one in its place, keeping every other
// controller's finalizer; Release removes both names; Held sees either.
func TestLegacyNameIsReplacedAndReleased(t *testing.T) {
	ctx := context.Background()
	f := For("example", "example.trustplane.io/cleanup")
	if f.Name != "example.trustplane.io/finalizer" {
		t.Fatalf("name %q", f.Name)
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "held",
		Finalizers: []string{"other.example.com/keep", "example.trustplane.io/cleanup"}}}
	c := fake.NewClientBuilder().WithObjects(obj).Build()
	if !f.Held(obj) {
		t.Error("the legacy name is not seen as held")
	}
	if err := f.Ensure(ctx, c, obj); err != nil {
		t.Fatal(err)
	}
	stored := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		t.Fatal(err)
	}
	if want := []string{"other.example.com/keep", f.Name}; !slices.Equal(stored.Finalizers, want) {
		t.Errorf("after Ensure: %v, want %v", stored.Finalizers, want)
	}
	version := stored.ResourceVersion
	if err := f.Ensure(ctx, c, stored); err != nil || stored.ResourceVersion != version {
		t.Errorf("a second Ensure wrote (%v, resourceVersion %s → %s)", err, version, stored.ResourceVersion)
	}
	if err := f.Release(ctx, c, stored); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		t.Fatal(err)
	}
	if want := []string{"other.example.com/keep"}; !slices.Equal(stored.Finalizers, want) {
		t.Errorf("after Release: %v, want %v", stored.Finalizers, want)
	}
}

// Ensure on a stale copy fails with a conflict instead of overwriting the stored list.
func TestEnsureOnAStaleCopyConflicts(t *testing.T) {
	ctx := context.Background()
	f := For("example")
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stale"}}
	c := fake.NewClientBuilder().WithObjects(obj).Build()
	stale := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stale); err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Finalizers = []string{"other.example.com/keep"}
	if err := c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := f.Ensure(ctx, c, stale); err == nil {
		t.Error("Ensure on a stale copy succeeded")
	}
}
