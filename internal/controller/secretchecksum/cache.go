package secretchecksum

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/handlers"
)

// newInputCache is the controller's own cache: Secrets and Ingresses in scope, and the
// checksum objects it published. Inputs are stripped to what the formula reads before
// they are stored: private keys never stay in the manager's memory.
func newInputCache(mgr ctrl.Manager, namespaces []string, selector labels.Selector, versionAnnotation string) (cache.Cache, error) {
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
			&corev1.Secret{}:             {Label: selector, Transform: stripSecret(versionAnnotation)},
			&networkingv1.Ingress{}:      {Label: selector, Transform: stripIngress(versionAnnotation)},
			&tenginev1.SecretCheckSum{}:  {Label: ours},
			&tenginev1.IngressCheckSum{}: {Label: ours},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the input cache: %w", err)
	}
	return c, mgr.Add(c)
}

// stripSecret keeps tls.crt and the version annotation; everything else is dropped
// before the object reaches the cache: tls.key above all, and other annotations too
// (kubectl's last-applied-configuration holds the whole Secret, key included).
func stripSecret(versionAnnotation string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		kept := map[string][]byte{}
		if crt, ok := s.Data[corev1.TLSCertKey]; ok {
			kept[corev1.TLSCertKey] = crt
		}
		s.Data, s.StringData, s.ManagedFields = kept, nil, nil
		s.Annotations = onlyAnnotation(s.Annotations, versionAnnotation)
		return s, nil
	}
}

// stripIngress keeps an Ingress's name and version annotation: all the formula reads.
func stripIngress(versionAnnotation string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if ing, ok := obj.(*networkingv1.Ingress); ok {
			ing.Spec, ing.Status, ing.ManagedFields = networkingv1.IngressSpec{}, networkingv1.IngressStatus{}, nil
			ing.Annotations = onlyAnnotation(ing.Annotations, versionAnnotation)
		}
		return obj, nil
	}
}

func onlyAnnotation(annotations map[string]string, key string) map[string]string {
	v, ok := annotations[key]
	if !ok {
		return nil
	}
	return map[string]string{key: v}
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
