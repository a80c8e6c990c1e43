// Package apply sends typed objects as server-side apply requests. Controllers build the
// object they want with the Go types, and apply only the fields they set: status, zero
// timestamps and the resourceVersion of the Go value are left out.
package apply

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Configuration is obj as an apply configuration: its kind and API version (from c's
// scheme when obj does not carry them), no status, no zero creationTimestamp (also in a pod
// template), no resourceVersion.
func Configuration(c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: content}
	if u.GetKind() == "" {
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return nil, err
		}
		u.SetGroupVersionKind(gvk)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

// Apply server-side applies the fields obj sets, owned by fieldOwner, taking them over
// from any other manager, and then holds in obj what the API server answered (the whole
// object, status included), as an Update or a Patch would.
func Apply(ctx context.Context, c client.Client, obj client.Object, fieldOwner string) error {
	u, err := Configuration(c, obj)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("reading the applied %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}
