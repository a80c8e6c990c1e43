package status

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/trustplane/trustplane/api/conditions"
)

// ReconcileRequested passes the updates that change the annotation
// conditions.ReconcileRequestedAnnotation (`trustplane reconcile`): added with predicate.Or
// to a controller's For predicates (GenerationChangedPredicate), it makes the request
// bring the object back although its generation did not change.
var ReconcileRequested = AnnotationsChanged(conditions.ReconcileRequestedAnnotation)

// AnnotationsChanged passes the updates that set, change or remove any of the annotations
// keys: for a controller whose For predicates pass generation changes only, the
// annotations that ask it to act.
func AnnotationsChanged(keys ...string) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			was, now := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
			for _, key := range keys {
				if was[key] != now[key] {
					return true
				}
			}
			return false
		},
	}
}

// markReconcileHandled records, on a kind that implements
// conditions.ReconcileRequestStatus, that this reconcile handled the request its
// annotation holds: status.lastHandledReconcileAt is written with the status patch.
func markReconcileHandled(obj conditions.Object) {
	handled, ok := obj.(conditions.ReconcileRequestStatus)
	if !ok {
		return
	}
	if at, asked := obj.GetAnnotations()[conditions.ReconcileRequestedAnnotation]; asked {
		handled.SetLastHandledReconcileAt(at)
	}
}
