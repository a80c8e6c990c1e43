package secretchecksum

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/handlers"
)

// newInputCache is the controller's own cache: Secrets and Ingresses in scope, and the
// checksum objects it published. Secrets are stripped to what the formula reads before
// they are stored: private keys never stay in the manager's memory.
func newInputCache(mgr ctrl.Manager, namespaces []string, selector labels.Selector) (cache.Cache, error) {
	var byNamespace map[string]cache.Config
	if len(namespaces) > 0 {
		byNamespace = map[string]cache.Config{}
		for _, ns := range namespaces {
			byNamespace[ns] = cache.Config{}
		}
	}
	ours := labels.SelectorFromSet(labels.Set{ManagedByLabel: managedByValue})
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: byNamespace,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:             {Label: selector, Transform: stripSecret},
			&networkingv1.Ingress{}:      {Label: selector, Transform: stripIngress},
			&tenginev1.SecretCheckSum{}:  {Label: ours},
			&tenginev1.IngressCheckSum{}: {Label: ours},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the input cache: %w", err)
	}
	return c, mgr.Add(c)
}

// stripSecret keeps tls.crt and the annotations; everything else (tls.key above all)
// is dropped before the object reaches the cache.
func stripSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	kept := map[string][]byte{}
	if crt, ok := s.Data[corev1.TLSCertKey]; ok {
		kept[corev1.TLSCertKey] = crt
	}
	s.Data, s.StringData = kept, nil
	s.ManagedFields = nil
	return s, nil
}

func stripIngress(obj any) (any, error) {
	if ing, ok := obj.(*networkingv1.Ingress); ok {
		ing.Spec, ing.Status, ing.ManagedFields = networkingv1.IngressSpec{}, networkingv1.IngressStatus{}, nil
	}
	return obj, nil
}

func kindSource[T client.Object](c cache.Cache, obj T, fn func(old, cur T, q handlers.Queue)) source.Source {
	return source.Kind(c, obj, handlers.OldNew(fn))
}

func isNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
