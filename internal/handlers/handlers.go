// Package handlers adapts plain "this object changed from old to cur" callbacks to
// controller-runtime event handlers, for controllers whose fan-out depends on both states.
package handlers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is the work queue events are added to.
type Queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// OldNew calls fn(zero, obj) on create, fn(old, new) on update and fn(obj, zero) on
// delete, where zero is T's nil.
func OldNew[T client.Object](fn func(old, cur T, q Queue)) handler.TypedEventHandler[T, reconcile.Request] {
	var zero T
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[T], q Queue) { fn(zero, e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[T], q Queue) { fn(e.ObjectOld, e.ObjectNew, q) },
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[T], q Queue) { fn(e.Object, zero, q) },
	}
}

// wakeBuffer is how many wakes may wait for the controller's source to read them.
const wakeBuffer = 1024

// Wakes makes the channel a controller's source.Channel reads objects to bring back from,
// and wake, which sends the object (made by object from its namespace and name) on it.
// wake never blocks: one that finds the channel full (the controller stopping) is
// dropped, and the caller must have the object come back some other way too (a
// RequeueAfter).
func Wakes(object func(namespace, name string) client.Object) (wakes <-chan event.GenericEvent, wake func(namespace, name string)) {
	ch := make(chan event.GenericEvent, wakeBuffer)
	return ch, func(namespace, name string) {
		select {
		case ch <- event.GenericEvent{Object: object(namespace, name)}:
		default:
		}
	}
}
