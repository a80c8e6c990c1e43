package secretchecksum

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/handlers"
)

// A Tengine-Ingress hashes only the Ingresses of its own class (alibaba/tengine-ingress
// internal/ingress/controller/store/store.go GetIngressClass), so the IngressCheckSum
// counts exactly those: one versioned Ingress of another class in the checksum makes
// every Tengine's ingCheck fail, and a failing ingCheck stops its syncIngress.

// ingressClassNameIndex indexes the cached Ingresses by spec.ingressClassName, so that an
// IngressClass event re-evaluates exactly the Ingresses that name it.
const ingressClassNameIndex = "spec.ingressClassName"

func indexIngressesByClass(c cache.Cache) error {
	err := c.IndexField(context.Background(), &networkingv1.Ingress{}, ingressClassNameIndex, func(o client.Object) []string {
		if name := o.(*networkingv1.Ingress).Spec.IngressClassName; name != nil {
			return []string{*name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing Ingresses by class: %w", err)
	}
	return nil
}

func (r *Reconciler) onIngress(old, cur *networkingv1.Ingress, q handlers.Queue) {
	r.ingressMu.Lock()
	defer r.ingressMu.Unlock()
	if cur == nil {
		r.record(checksum.TrackIngresses, old, "", nil, q)
		return
	}
	r.recordIngress(cur, q)
}

// onIngressClass re-evaluates the Ingresses that name a class when it appears, goes, or
// changes its controller: their membership depends on it. (Tengine-Ingress itself only
// re-reads an Ingress when the Ingress changes; what it keeps after a restart is what
// counts here.)
func (r *Reconciler) onIngressClass(old, cur *networkingv1.IngressClass, q handlers.Queue) {
	if old != nil && cur != nil && old.Spec.Controller == cur.Spec.Controller {
		return // the name and the controller are all a class decides by
	}
	class := cur
	if cur == nil {
		class = old
	}
	r.ingressMu.Lock()
	defer r.ingressMu.Unlock()
	ingresses := &networkingv1.IngressList{}
	if err := r.Reader.List(context.Background(), ingresses, client.MatchingFields{ingressClassNameIndex: class.Name}); err != nil {
		log.Log.WithName(Name).Error(err, "re-evaluating the Ingresses of an IngressClass", "ingressClass", class.Name)
		return
	}
	for i := range ingresses.Items {
		r.recordIngress(&ingresses.Items[i], q)
	}
}

// recordIngress puts an Ingress's ID into its publications, or takes it out when a
// Tengine-Ingress with the configured class flags would not keep it. The caller holds
// ingressMu.
func (r *Reconciler) recordIngress(ing *networkingv1.Ingress, q handlers.Queue) {
	id, err := r.opts.IngressClasses.IngressIDOfClass(ing.Name, ing.Annotations, ing.Spec.IngressClassName,
		r.opts.VersionAnnotation, r.ingressClass)
	r.record(checksum.TrackIngresses, ing, id, err, q)
}

// ingressClass looks a class up in the cache. Only "not there" means absent; the cache
// answers nothing else for a type it holds, and an IngressClass has no content that could
// fail to decode beyond its name and controller.
func (r *Reconciler) ingressClass(name string) (controller string, exists bool) {
	class := &networkingv1.IngressClass{}
	err := r.Reader.Get(context.Background(), client.ObjectKey{Name: name}, class)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.Log.WithName(Name).Error(err, "reading an IngressClass from the cache", "ingressClass", name)
		}
		return "", false
	}
	return class.Spec.Controller, true
}
