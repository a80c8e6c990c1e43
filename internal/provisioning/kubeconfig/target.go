package kubeconfig

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// applyRBAC applies the ServiceAccount, Role/RoleBinding and ClusterRole/Binding.
func (r *Reconciler) applyRBAC(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *clustertarget.Target) error {
	name := targetName(kr)
	labels, annotations := requestLabels(kr, t), requestAnnotations(kr)
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: TargetNamespace}}
	objs := []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: TargetNamespace, Labels: labels, Annotations: annotations}},
	}
	if kr.Spec.ClusterRole != nil {
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}, Rules: toRBAC(kr.Spec.ClusterRole.Rules)},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject})
	}
	if kr.Spec.Role != nil {
		ns := kr.Spec.Role.Namespace
		objs = append(objs,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations}, Rules: toRBAC(kr.Spec.Role.Rules)},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject})
	}
	// The objects do not depend on each other (a binding may name a role that is not there
	// yet), so they are applied at once.
	var g errgroup.Group
	for _, obj := range objs {
		g.Go(func() error { return createOrApply(ctx, t.Client, obj, kr.Status.IssuedAt == nil) })
	}
	return g.Wait()
}

// requestLabels identify the request, and the Cluster it was granted through, on every
// object made for it in a target cluster.
func requestLabels(kr *operatorv1alpha1.KubeconfigRequest, t *clustertarget.Target) map[string]string {
	labels := map[string]string{RequestLabel: targetName(kr), RequestNamespaceLabel: kr.Namespace, RequestUIDLabel: string(kr.UID),
		ClusterUIDLabel: string(t.UID), "app.kubernetes.io/managed-by": "trustplane"}
	if len(kr.Name) <= validation.LabelValueMaxLength {
		labels[RequestNameLabel] = kr.Name
	}
	return labels
}

// requestAnnotations name the request in full (its name may not fit a label value).
func requestAnnotations(kr *operatorv1alpha1.KubeconfigRequest) map[string]string {
	return map[string]string{RequestAnnotation: kr.Namespace + "/" + kr.Name}
}

// deleteEverything deletes what the request holds in a target cluster: everything
// labelled with its target name, and everything labelled with its UID (objects made under
// the other of its two names, say by an earlier version that died before its status
// named them).
func deleteEverything(ctx context.Context, c client.Client, kr *operatorv1alpha1.KubeconfigRequest) error {
	for _, selector := range []client.MatchingLabels{{RequestLabel: targetName(kr)}, {RequestUIDLabel: string(kr.UID)}} {
		if err := deleteSelected(ctx, c, selector); err != nil {
			return err
		}
	}
	return nil
}

// deleteSelected deletes the token bindings, the ServiceAccount, the roles and the
// bindings the selector selects.
func deleteSelected(ctx context.Context, c client.Client, selector client.MatchingLabels) error {
	if err := c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the token bindings in %s: %w", TargetNamespace, err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ServiceAccount{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the ServiceAccount in %s: %w", TargetNamespace, err)
	}
	return deleteRBACSelected(ctx, c, selector, "", false)
}

// deleteRBAC deletes the request's Roles and RoleBindings in every namespace but
// keepRoleIn, and its ClusterRoles and ClusterRoleBindings unless keepClusterRole, found by
// label: whatever namespace an earlier spec named, its grants are found.
func deleteRBAC(ctx context.Context, c client.Client, name, keepRoleIn string, keepClusterRole bool) error {
	return deleteRBACSelected(ctx, c, client.MatchingLabels{RequestLabel: name}, keepRoleIn, keepClusterRole)
}

func deleteRBACSelected(ctx context.Context, c client.Client, selector client.MatchingLabels, keepRoleIn string, keepClusterRole bool) error {
	lists := []client.ObjectList{&rbacv1.RoleBindingList{}, &rbacv1.RoleList{}}
	if !keepClusterRole {
		lists = append(lists, &rbacv1.ClusterRoleBindingList{}, &rbacv1.ClusterRoleList{})
	}
	for _, list := range lists {
		if err := c.List(ctx, list, selector); err != nil {
			return fmt.Errorf("listing %T by label %v: %w", list, selector, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			obj := o.(client.Object)
			if obj.GetNamespace() != "" && obj.GetNamespace() == keepRoleIn {
				continue
			}
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return status.WriteFailed("delete", obj, err)
			}
		}
	}
	return nil
}

// targetName is the name of the request's objects in the target cluster, and the value
// of their RequestLabel: the one its status records (status.targetName) when that is one
// of the request's own names; the legacy name for a request an earlier version served (a
// status stored without one: its token names that ServiceAccount); otherwise the name
// every new request gets. Reconcile records it before anything is granted.
func targetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	name, legacy := newTargetName(kr), legacyTargetName(kr)
	switch recorded := kr.Status.TargetName; {
	case recorded == name || recorded == legacy:
		return recorded
	case recorded == "" && kr.StatusStored():
		return legacy
	}
	return name
}

// newTargetName is "kcr-", the namespace and name as far as they fit, and 16 characters
// of base32 (80 bits) of the SHA-256 of "<namespace>/<name>": the readable part may be
// ambiguous ("team"/"prod-ci" and "team-prod"/"ci"), the hash is not ('/' is in neither
// a namespace nor a name), and finding two requests that share a name costs about 2^40
// hashes, one that takes a given request's name about 2^80. 63 characters at most: a
// label value.
func newTargetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	sum := sha256.Sum256([]byte(kr.Namespace + "/" + kr.Name))
	hash := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:16]
	readable := "kcr-" + kr.Namespace + "-" + kr.Name
	if room := validation.LabelValueMaxLength - 1 - len(hash); len(readable) > room {
		readable = readable[:room]
	}
	return strings.TrimRight(readable, "-.") + "-" + hash
}

// legacyTargetName is the name versions before status.targetName gave a request's
// objects: the same readable part (50 characters at most) and 8 hex digits (32 bits).
func legacyTargetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	sum := sha256.Sum256([]byte(kr.Namespace + "/" + kr.Name))
	base := "kcr-" + kr.Namespace + "-" + kr.Name
	if len(base) > 50 {
		base = base[:50]
	}
	return strings.TrimRight(base, "-.") + "-" + hex.EncodeToString(sum[:4])
}

func toRBAC(rules []operatorv1alpha1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
	}
	return out
}

// createOrApply applies obj; for a request never issued before it first tries a plain
// create, which costs the API server about half of an apply that creates, and falls back
// to the apply when the object is already there.
func createOrApply(ctx context.Context, c client.Client, obj client.Object, fresh bool) error {
	if fresh {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner))
		if !apierrors.IsAlreadyExists(err) {
			return status.WriteFailed("create", obj, err)
		}
	}
	return status.WriteFailed("apply", obj, apply.Apply(ctx, c, obj, FieldOwner))
}

// ensureNamespace applies TargetNamespace in the target, once per connection (again after
// a failure).
func ensureNamespace(ctx context.Context, t *clustertarget.Target) error {
	return t.Prepare(func() error {
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: TargetNamespace}}
		return status.WriteFailed("apply", ns, apply.Apply(ctx, t.Client, ns, FieldOwner))
	})
}
