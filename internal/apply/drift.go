package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// extractors are the kinds whose owned fields can be extracted: client-go's typed
// Extract function of each, and a new apply configuration of its type.
var extractors = map[reflect.Type]struct {
	extract func(obj client.Object, fieldOwner string) (any, error)
	empty   func() any
}{
	reflect.TypeFor[*corev1.ConfigMap](): {
		func(o client.Object, m string) (any, error) {
			return corev1ac.ExtractConfigMap(o.(*corev1.ConfigMap), m)
		},
		func() any { return &corev1ac.ConfigMapApplyConfiguration{} }},
	reflect.TypeFor[*corev1.Service](): {
		func(o client.Object, m string) (any, error) { return corev1ac.ExtractService(o.(*corev1.Service), m) },
		func() any { return &corev1ac.ServiceApplyConfiguration{} }},
	reflect.TypeFor[*appsv1.Deployment](): {
		func(o client.Object, m string) (any, error) {
			return appsv1ac.ExtractDeployment(o.(*appsv1.Deployment), m)
		},
		func() any { return &appsv1ac.DeploymentApplyConfiguration{} }},
}

// Owned is the part of current that fieldOwner owns, as server-side apply records it in
// managedFields, with the values current holds: what fieldOwner would apply to get exactly
// this object. A field that another manager changed (kubectl edit, scale, another
// controller's apply with force) has moved to that manager and is missing here.
//
// An object fieldOwner made with a plain create (which costs the API server about half
// of an apply that creates) and has not applied since has its fields recorded under
// fieldOwner's Update operation: those are its own then.
//
// Only the kinds controllers of this project write are known; another kind is an error.
func Owned(current client.Object, fieldOwner string) (any, error) {
	kind, ok := extractors[reflect.TypeOf(current)]
	if !ok {
		return nil, fmt.Errorf("extracting the fields %s owns: kind %T is not supported", fieldOwner, current)
	}
	ac, err := kind.extract(createdAsApplied(current, fieldOwner), fieldOwner)
	if err != nil {
		return nil, fmt.Errorf("extracting the fields %s owns in %s: %w", fieldOwner, current.GetName(), err)
	}
	return ac, nil
}

// WrittenBy says whether fieldOwner has applied obj, or made it with a plain create.
func WrittenBy(obj client.Object, fieldOwner string) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == fieldOwner && f.Subresource == "" &&
			(f.Operation == metav1.ManagedFieldsOperationApply || f.Operation == metav1.ManagedFieldsOperationUpdate)
	})
}

// createdAsApplied is obj with fieldOwner's Update entry read as its Apply entry, when it
// has no Apply entry (client-go's Extract functions read only those); else obj itself.
func createdAsApplied(obj client.Object, fieldOwner string) client.Object {
	entries := obj.GetManagedFields()
	update := -1
	for i, f := range entries {
		if f.Manager != fieldOwner || f.Subresource != "" {
			continue
		}
		switch f.Operation {
		case metav1.ManagedFieldsOperationApply:
			return obj
		case metav1.ManagedFieldsOperationUpdate:
			update = i
		}
	}
	if update < 0 {
		return obj
	}
	copied := obj.DeepCopyObject().(client.Object)
	entries = copied.GetManagedFields()
	entries[update].Operation = metav1.ManagedFieldsOperationApply
	copied.SetManagedFields(entries)
	return copied
}

// Drifted says whether current differs from desired in the fields desired sets: whether
// fieldOwner, who applied desired before, would change anything by applying it again.
// Both sides are compared as the typed apply configuration of their kind, so quantities,
// defaults the API server filled in and field order do not count as differences; a value
// someone else changed, a field someone else removed, and a field desired sets that
// fieldOwner does not own yet all do.
func Drifted(c client.Client, current, desired client.Object, fieldOwner string) (bool, error) {
	owned, err := Owned(current, fieldOwner)
	if err != nil {
		return true, err
	}
	have, err := json.Marshal(owned)
	if err != nil {
		return true, fmt.Errorf("encoding the owned fields of %s: %w", current.GetName(), err)
	}
	want, err := typedConfiguration(c, desired, extractors[reflect.TypeOf(current)].empty())
	if err != nil {
		return true, err
	}
	haveTree, wantTree := pruned(have), pruned(want)
	if haveTree == nil || wantTree == nil {
		return true, fmt.Errorf("comparing %s: not a JSON object", current.GetName())
	}
	return !equality.Semantic.DeepEqual(haveTree, wantTree), nil
}

// pruned is the JSON object raw with its empty objects removed, recursively: an empty
// struct in the desired object (say `strategy: {}`) sets no field, so server-side apply
// records no ownership for it, and it must not count as a difference.
func pruned(raw []byte) map[string]any {
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil
	}
	prune(tree)
	return tree
}

func prune(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if prune(child) {
				delete(t, k)
			}
		}
		return len(t) == 0
	case []any:
		for _, child := range t {
			prune(child)
		}
	}
	return false
}

// typedConfiguration is desired decoded into typed (an empty apply configuration of its
// kind) and encoded again: the same normalisation the extracted side went through.
func typedConfiguration(c client.Client, desired client.Object, typed any) ([]byte, error) {
	u, err := Configuration(c, desired)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", desired.GetName(), err)
	}
	if err := json.Unmarshal(raw, typed); err != nil {
		return nil, fmt.Errorf("decoding %s as an apply configuration: %w", desired.GetName(), err)
	}
	return json.Marshal(typed)
}
