package access

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// Object is a Kubernetes object with metadata: what Grants returns, for a client to apply.
type Object interface {
	metav1.Object
	runtime.Object
}

// Grants are the objects a KubeconfigRequest is granted in the target cluster of the
// Cluster with clusterUID: its ServiceAccount in KubeconfigTargetNamespace, then, as the
// spec asks, a ClusterRole and its ClusterRoleBinding (cluster-wide rules) and a Role and
// its RoleBinding in the Role's namespace (namespaced rules). Every one is named
// TargetName and carries RequestLabels and RequestAnnotations. They do not depend on each
// other (a binding may name a role that is not there yet). Whether the rules are allowed
// is the Ceiling's to say (CheckRequest), before anything is granted.
func Grants(kr *operatorv1alpha1.KubeconfigRequest, clusterUID types.UID) []Object {
	name := TargetName(kr)
	meta := func(namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: RequestLabels(kr, clusterUID), Annotations: RequestAnnotations(kr)}
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: operatorv1alpha1.KubeconfigTargetNamespace}}
	objs := []Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(operatorv1alpha1.KubeconfigTargetNamespace)},
	}
	rbac := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
	}
	if kr.Spec.ClusterRole != nil {
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: rbac("ClusterRole"), ObjectMeta: meta(""), Rules: Rules(kr.Spec.ClusterRole.Rules)},
			&rbacv1.ClusterRoleBinding{TypeMeta: rbac("ClusterRoleBinding"), ObjectMeta: meta(""),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject})
	}
	if kr.Spec.Role != nil {
		ns := kr.Spec.Role.Namespace
		objs = append(objs,
			&rbacv1.Role{TypeMeta: rbac("Role"), ObjectMeta: meta(ns), Rules: Rules(kr.Spec.Role.Rules)},
			&rbacv1.RoleBinding{TypeMeta: rbac("RoleBinding"), ObjectMeta: meta(ns),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject})
	}
	return objs
}

// TokenBinding is a new token binding of the request: a Secret in
// KubeconfigTargetNamespace, named by the server after TargetName, that the token issued
// now (for spec.expiration) is bound to, so that deleting it revokes exactly that token.
// KubeconfigExpiresAnnotation records when the token expires at the latest (the server
// may shorten a lifetime, never lengthen it): a safe time to delete the binding.
func TokenBinding(kr *operatorv1alpha1.KubeconfigRequest, clusterUID types.UID, now time.Time) *corev1.Secret {
	annotations := RequestAnnotations(kr)
	annotations[operatorv1alpha1.KubeconfigExpiresAnnotation] = now.Add(time.Duration(kr.Spec.Expiration) * time.Second).UTC().Format(time.RFC3339)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: TargetName(kr) + "-", Namespace: operatorv1alpha1.KubeconfigTargetNamespace,
		Labels: RequestLabels(kr, clusterUID), Annotations: annotations}}
}

// BindingExpiry is when the token bound to a token binding expires; zero when it does not
// say (KubeconfigExpiresAnnotation).
func BindingExpiry(binding metav1.Object) time.Time {
	expires, _ := time.Parse(time.RFC3339, binding.GetAnnotations()[operatorv1alpha1.KubeconfigExpiresAnnotation])
	return expires
}

// RequestLabels identify the request, and the Cluster it was granted through (its UID),
// on every object made for it in a target cluster. The request's name is there only where
// it fits a label value; RequestAnnotations name it in full.
func RequestLabels(kr *operatorv1alpha1.KubeconfigRequest, clusterUID types.UID) map[string]string {
	labels := map[string]string{operatorv1alpha1.KubeconfigRequestLabel: TargetName(kr), operatorv1alpha1.KubeconfigRequestNamespaceLabel: kr.Namespace,
		operatorv1alpha1.KubeconfigRequestUIDLabel: string(kr.UID), operatorv1alpha1.KubeconfigClusterUIDLabel: string(clusterUID),
		"app.kubernetes.io/managed-by": "trustplane"}
	if len(kr.Name) <= validation.LabelValueMaxLength {
		labels[operatorv1alpha1.KubeconfigRequestNameLabel] = kr.Name
	}
	return labels
}

// RequestAnnotations name the request in full (its name may not fit a label value).
func RequestAnnotations(kr *operatorv1alpha1.KubeconfigRequest) map[string]string {
	return map[string]string{operatorv1alpha1.KubeconfigRequestAnnotation: kr.Namespace + "/" + kr.Name}
}

// Rules are the RBAC rules of a request's rules.
func Rules(rules []operatorv1alpha1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
	}
	return out
}

// CheckRequest is why the request's rules exceed the ceiling, each problem prefixed by
// where it is: a ClusterRole's rules reach every namespace, a Role's only its own.
func (c Ceiling) CheckRequest(spec operatorv1alpha1.KubeconfigRequestSpec) []string {
	var problems []string
	if spec.ClusterRole != nil {
		for _, p := range c.Check(Rules(spec.ClusterRole.Rules), "") {
			problems = append(problems, "clusterRole "+p)
		}
	}
	if spec.Role != nil {
		for _, p := range c.Check(Rules(spec.Role.Rules), spec.Role.Namespace) {
			problems = append(problems, "role "+p)
		}
	}
	return problems
}

// TargetName is the name of the request's objects in the target cluster, and the value
// of their KubeconfigRequestLabel: the one its status records (status.targetName) when
// that is one of the request's own names; the legacy name for a request an earlier
// version served (a status stored without one: its token names that ServiceAccount);
// otherwise the name every new request gets. The controller records it before anything
// is granted.
func TargetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	name, legacy := NewTargetName(kr), LegacyTargetName(kr)
	switch recorded := kr.Status.TargetName; {
	case recorded == name || recorded == legacy:
		return recorded
	case recorded == "" && kr.StatusStored():
		return legacy
	}
	return name
}

// NewTargetName is "kcr-", the namespace and name as far as they fit, and 16 characters
// of base32 (80 bits) of the SHA-256 of "<namespace>/<name>": the readable part may be
// ambiguous ("team"/"prod-ci" and "team-prod"/"ci"), the hash is not ('/' is in neither
// a namespace nor a name), and finding two requests that share a name costs about 2^40
// hashes, one that takes a given request's name about 2^80. 63 characters at most: a
// label value.
func NewTargetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	sum := sha256.Sum256([]byte(kr.Namespace + "/" + kr.Name))
	hash := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:16]
	readable := "kcr-" + kr.Namespace + "-" + kr.Name
	if room := validation.LabelValueMaxLength - 1 - len(hash); len(readable) > room {
		readable = readable[:room]
	}
	return strings.TrimRight(readable, "-.") + "-" + hash
}

// LegacyTargetName is the name versions before status.targetName gave a request's
// objects: the same readable part (50 characters at most) and 8 hex digits (32 bits).
func LegacyTargetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	sum := sha256.Sum256([]byte(kr.Namespace + "/" + kr.Name))
	base := "kcr-" + kr.Namespace + "-" + kr.Name
	if len(base) > 50 {
		base = base[:50]
	}
	return strings.TrimRight(base, "-.") + "-" + hex.EncodeToString(sum[:4])
}
