// Package finalizer is how every trustplane controller holds an object until its cleanup
// is done: one finalizer per controller, named "<controller>.trustplane.io/finalizer",
// added before the first write anywhere else and removed as the last step of a deletion.
//
// A controller whose finalizer had another name before keeps honouring it (Legacy): an
// object that carries the old name is finalized as before, and a live one gets the new
// name in place of the old one on its next reconcile, so an upgrade strands nothing.
package finalizer

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trustplane/trustplane/internal/status"
)

// Finalizer is one controller's finalizer.
type Finalizer struct {
	// Name is the finalizer written on objects: "<controller>.trustplane.io/finalizer".
	Name string
	// Legacy are names earlier versions wrote: still honoured, replaced by Name.
	Legacy []string
}

// For is the finalizer of the controller named controller (its --controllers name).
func For(controller string, legacy ...string) Finalizer {
	return Finalizer{Name: controller + ".trustplane.io/finalizer", Legacy: legacy}
}

// Held says whether obj carries the finalizer under any of its names: a deleted object
// that does still has cleanup to do.
func (f Finalizer) Held(obj client.Object) bool {
	return slices.ContainsFunc(obj.GetFinalizers(), f.names)
}

// Ensure adds the finalizer to obj (in place of a legacy name) and writes obj when that
// changed it; obj then holds what the API server stored. The write is an optimistic-lock
// patch of metadata.finalizers only: it never writes the spec, and fails with a conflict
// when obj is not the stored version.
func (f Finalizer) Ensure(ctx context.Context, c client.Client, obj client.Object) error {
	if controllerutil.ContainsFinalizer(obj, f.Name) && !slices.ContainsFunc(obj.GetFinalizers(), f.legacy) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	f.removeLegacy(obj)
	controllerutil.AddFinalizer(obj, f.Name)
	return status.WriteFailed("patch", obj, c.Patch(ctx, obj, patch))
}

// Release removes every name of the finalizer from obj and writes obj, as Ensure does: the
// last step of a deletion. An object gone already is no error.
func (f Finalizer) Release(ctx context.Context, c client.Client, obj client.Object) error {
	if !f.Held(obj) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	f.removeLegacy(obj)
	controllerutil.RemoveFinalizer(obj, f.Name)
	return client.IgnoreNotFound(status.WriteFailed("patch", obj, c.Patch(ctx, obj, patch)))
}

func (f Finalizer) removeLegacy(obj client.Object) {
	for _, old := range f.Legacy {
		controllerutil.RemoveFinalizer(obj, old)
	}
}

func (f Finalizer) names(name string) bool { return name == f.Name || f.legacy(name) }

func (f Finalizer) legacy(name string) bool { return slices.Contains(f.Legacy, name) }
