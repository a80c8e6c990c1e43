package subscription

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// hold is the operator's reason for holding the pool (cp.AnnotationPoolHold on the pool's
// Namespace of the management cluster), and whether it is held. It is read from the
// manager's cache of Namespaces' metadata: a hold set while a claim is already under way
// lets that claim finish; everything after it waits.
func (r *Reconciler) hold(ctx context.Context) (reason string, held bool, err error) {
	if r.opts.PoolNamespace == "" {
		return "", false, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.opts.PoolNamespace}, ns); client.IgnoreNotFound(err) != nil {
		return "", false, fmt.Errorf("reading whether the pool is on hold (namespace %s): %w", r.opts.PoolNamespace, err)
	}
	reason, held = ns.Annotations[cp.AnnotationPoolHold]
	return reason, held, nil
}

// checkHold makes a claim or a release wait while the pool is on hold. The Namespace
// watch brings the request back when the hold is lifted.
func (r *Reconciler) checkHold(ctx context.Context, what string) error {
	reason, held, err := r.hold(ctx)
	if err != nil || !held {
		return err
	}
	if reason == "" {
		reason = "no reason given"
	}
	return status.Waiting(cp.ReasonPoolOnHold, "the pool is on hold (%s): %s waits until the operator lifts it with: kubectl annotate namespace %s %s-",
		reason, what, r.opts.PoolNamespace, cp.AnnotationPoolHold).Warn()
}

// holdChanged passes the pool Namespace's creation with a hold, and the hold's being set,
// changed or lifted.
func (r *Reconciler) holdChanged(o client.Object, old map[string]string) bool {
	if o.GetName() != r.opts.PoolNamespace {
		return false
	}
	before, wasHeld := old[cp.AnnotationPoolHold]
	now, held := o.GetAnnotations()[cp.AnnotationPoolHold]
	return wasHeld != held || before != now
}

// namespaceChanged passes the Namespace changes the controller acts on: a change of a
// namespace's grants, or of the pool's hold.
func (r *Reconciler) namespaceChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			_, granted := e.Object.GetAnnotations()[cp.AnnotationGlobalAccounts]
			return granted || r.holdChanged(e.Object, nil)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[cp.AnnotationGlobalAccounts] != e.ObjectNew.GetAnnotations()[cp.AnnotationGlobalAccounts] ||
				r.holdChanged(e.ObjectNew, e.ObjectOld.GetAnnotations())
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// requestsOfNamespaceChange brings back, when a namespace's grants change, its requests
// that have no credential yet; and every request when the pool's hold changes (waiting
// claims, and deleted requests waiting to release).
func (r *Reconciler) requestsOfNamespaceChange(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetName() != r.opts.PoolNamespace {
		return r.requestsWith(ctx, o.GetName(), "")
	}
	list := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, sr := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sr)})
	}
	return out
}
