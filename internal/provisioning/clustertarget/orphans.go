package clustertarget

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// grantKinds are what the Kubeconfig operator makes in a target, in the order they are
// deleted: token bindings first (their tokens die with them), the ServiceAccount, then
// bindings before roles. The first two live in KubeconfigTargetNamespace only.
var grantKinds = []struct {
	gvk        schema.GroupVersionKind
	namespaced bool // in KubeconfigTargetNamespace only
}{
	{corev1.SchemeGroupVersion.WithKind("Secret"), true},
	{corev1.SchemeGroupVersion.WithKind("ServiceAccount"), true},
	{rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), false},
	{rbacv1.SchemeGroupVersion.WithKind("Role"), false},
	{rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), false},
	{rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), false},
}

// SweepOrphans deletes, in the target cluster of the Cluster c (reached with target), the
// objects KubeconfigRequests were granted through c whose request no longer exists: the
// request's finalizer normally withdraws them, but a request deleted without it (forced,
// or by an earlier version's bug) leaves them, and with them a token valid until it
// expires. An object is c's when it carries c's UID (KubeconfigClusterUIDLabel), or,
// made before that label, when its request's namespace is one c grants now: another
// Cluster, or another management cluster, reaching the same API server is never swept.
// A request is gone when requests (read uncached: a request just made must not look
// gone) has none of that namespace and name with that UID. It returns what it deleted.
func SweepOrphans(ctx context.Context, target client.Client, requests client.Reader, c *operatorv1alpha1.Cluster) ([]string, error) {
	ours, err := labels.NewRequirement(operatorv1alpha1.KubeconfigRequestUIDLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	selector := labels.NewSelector().Add(*ours)
	gone := map[types.UID]bool{}
	var deleted []string
	for _, kind := range grantKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(kind.gvk.GroupVersion().WithKind(kind.gvk.Kind + "List"))
		opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
		if kind.namespaced {
			opts = append(opts, client.InNamespace(operatorv1alpha1.KubeconfigTargetNamespace))
		}
		if err := target.List(ctx, list, opts...); err != nil {
			return deleted, fmt.Errorf("listing %ss granted to KubeconfigRequests: %w", kind.gvk.Kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if !grantedThrough(obj, c) {
				continue
			}
			uid := types.UID(obj.Labels[operatorv1alpha1.KubeconfigRequestUIDLabel])
			isGone, known := gone[uid]
			if !known {
				if isGone, err = requestGone(ctx, requests, obj, uid); err != nil {
					return deleted, err
				}
				gone[uid] = isGone
			}
			if !isGone {
				continue
			}
			obj.SetGroupVersionKind(kind.gvk)
			if err := target.Delete(ctx, obj, client.Preconditions{UID: &obj.UID}); client.IgnoreNotFound(err) != nil {
				return deleted, status.WriteFailed("delete", obj, err)
			}
			deleted = append(deleted, fmt.Sprintf("%s %s", kind.gvk.Kind, client.ObjectKeyFromObject(obj)))
		}
	}
	return deleted, nil
}

// grantedThrough says whether obj was granted through c (see SweepOrphans).
func grantedThrough(obj client.Object, c *operatorv1alpha1.Cluster) bool {
	if uid, ok := obj.GetLabels()[operatorv1alpha1.KubeconfigClusterUIDLabel]; ok {
		return uid == string(c.UID)
	}
	namespace := obj.GetLabels()[operatorv1alpha1.KubeconfigRequestNamespaceLabel]
	return namespace != "" && c.GrantsKubeconfigRequestsFrom(namespace)
}

// requestGone says whether the request obj names (KubeconfigRequestAnnotation) with uid
// does not exist. An object that names no request is left alone.
func requestGone(ctx context.Context, requests client.Reader, obj client.Object, uid types.UID) (bool, error) {
	namespace, name, ok := strings.Cut(obj.GetAnnotations()[operatorv1alpha1.KubeconfigRequestAnnotation], "/")
	if !ok || namespace == "" || name == "" || namespace != obj.GetLabels()[operatorv1alpha1.KubeconfigRequestNamespaceLabel] {
		return false, nil
	}
	kr := &metav1.PartialObjectMetadata{}
	kr.SetGroupVersionKind(operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))
	err := requests.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, kr)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading KubeconfigRequest %s/%s: %w", namespace, name, err)
	}
	return kr.UID != uid, nil
}

// Sorted is a sweep's list of deleted objects, sorted, for a message.
func Sorted(deleted []string) string {
	deleted = slices.Clone(deleted)
	slices.Sort(deleted)
	return strings.Join(deleted, ", ")
}
