package access

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

func rules(verbs ...string) []operatorv1alpha1.PolicyRule {
	return []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}}
}

// TestGrants: the objects a request is granted in the target, by what its spec asks:
// namespaced rules as a Role and RoleBinding in the Role's namespace, cluster-wide rules
// as a ClusterRole and ClusterRoleBinding, always the ServiceAccount they bind; each
// named after the request and labelled with it and the Cluster it was granted through.
func TestGrants(t *testing.T) {
	const clusterUID = types.UID("cluster-1")
	for _, tc := range []struct {
		name string
		spec operatorv1alpha1.KubeconfigRequestSpec
		want []string // kind/namespace
	}{
		{"namespaced", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules("get")}},
			[]string{"ServiceAccount/" + operatorv1alpha1.KubeconfigTargetNamespace, "Role/team", "RoleBinding/team"}},
		{"cluster-wide", operatorv1alpha1.KubeconfigRequestSpec{ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: rules("list")}},
			[]string{"ServiceAccount/" + operatorv1alpha1.KubeconfigTargetNamespace, "ClusterRole/", "ClusterRoleBinding/"}},
		{"both", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules("get")}, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: rules("list")}},
			[]string{"ServiceAccount/" + operatorv1alpha1.KubeconfigTargetNamespace, "ClusterRole/", "ClusterRoleBinding/", "Role/team", "RoleBinding/team"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "reader", UID: "request-1"}, Spec: tc.spec}
			name := TargetName(kr)
			var got []string
			for _, obj := range Grants(kr, clusterUID) {
				kind := obj.GetObjectKind().GroupVersionKind().Kind
				got = append(got, kind+"/"+obj.GetNamespace())
				if obj.GetName() != name {
					t.Errorf("%s named %q, want %q", kind, obj.GetName(), name)
				}
				l := obj.GetLabels()
				if l[operatorv1alpha1.KubeconfigRequestLabel] != name || l[operatorv1alpha1.KubeconfigRequestNamespaceLabel] != "tenant" || l[operatorv1alpha1.KubeconfigRequestNameLabel] != "reader" ||
					l[operatorv1alpha1.KubeconfigRequestUIDLabel] != "request-1" || l[operatorv1alpha1.KubeconfigClusterUIDLabel] != string(clusterUID) {
					t.Errorf("%s labelled %v", kind, l)
				}
				if a := obj.GetAnnotations()[operatorv1alpha1.KubeconfigRequestAnnotation]; a != "tenant/reader" {
					t.Errorf("%s annotated %q", kind, a)
				}
				switch o := obj.(type) {
				case *rbacv1.RoleBinding:
					if o.RoleRef.Kind != "Role" || o.RoleRef.Name != name || len(o.Subjects) != 1 || o.Subjects[0].Name != name || o.Subjects[0].Namespace != operatorv1alpha1.KubeconfigTargetNamespace {
						t.Errorf("RoleBinding %+v %+v", o.RoleRef, o.Subjects)
					}
				case *rbacv1.ClusterRoleBinding:
					if o.RoleRef.Kind != "ClusterRole" || o.RoleRef.Name != name || len(o.Subjects) != 1 || o.Subjects[0].Name != name {
						t.Errorf("ClusterRoleBinding %+v %+v", o.RoleRef, o.Subjects)
					}
				case *rbacv1.Role:
					if fmt.Sprint(o.Rules) != fmt.Sprint(Rules(tc.spec.Role.Rules)) {
						t.Errorf("Role rules %v", o.Rules)
					}
				case *rbacv1.ClusterRole:
					if fmt.Sprint(o.Rules) != fmt.Sprint(Rules(tc.spec.ClusterRole.Rules)) {
						t.Errorf("ClusterRole rules %v", o.Rules)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("objects %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCheckRequest: the ceiling as a request meets it: forbidden verbs and wildcards are
// refused wherever they are, an escalation route is refused cluster-wide and in a
// protected namespace, and each problem says which of the request's roles it is in.
func TestCheckRequest(t *testing.T) {
	ceiling := DefaultCeiling()
	ceiling.ProtectedNamespaces = append(ceiling.ProtectedNamespaces, operatorv1alpha1.KubeconfigTargetNamespace)
	exec := []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}}
	for _, tc := range []struct {
		name string
		spec operatorv1alpha1.KubeconfigRequestSpec
		want []string // a substring of each problem, in order
	}{
		{"namespaced reader", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules("get", "list")}}, nil},
		{"cluster-wide reader", operatorv1alpha1.KubeconfigRequestSpec{ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: rules("list")}}, nil},
		{"forbidden verb in a role", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules("impersonate")}},
			[]string{`role rule 1: verb "impersonate" is not granted`}},
		{"forbidden verb cluster-wide", operatorv1alpha1.KubeconfigRequestSpec{ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: rules("escalate")}},
			[]string{`clusterRole rule 1: verb "escalate" is not granted`}},
		{"wildcard verb", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules("*")}},
			[]string{`role rule 1: verb "*" would include escalate, bind, impersonate`}},
		{"exec in a namespace", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: exec}}, nil},
		{"exec in a protected namespace", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: "kube-system", Rules: exec}},
			[]string{"role rule 1 reaches", "in namespace kube-system"}},
		{"exec where the ServiceAccounts live", operatorv1alpha1.KubeconfigRequestSpec{Role: &operatorv1alpha1.RoleSpec{Namespace: operatorv1alpha1.KubeconfigTargetNamespace, Rules: exec}},
			[]string{"in namespace " + operatorv1alpha1.KubeconfigTargetNamespace}},
		{"exec cluster-wide", operatorv1alpha1.KubeconfigRequestSpec{ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: exec}},
			[]string{"clusterRole rule 1 reaches", "cluster-wide (which includes kube-system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ceiling.CheckRequest(tc.spec)
			joined := strings.Join(got, "\n")
			if len(tc.want) == 0 && len(got) > 0 {
				t.Errorf("refused: %v", got)
			}
			for _, want := range tc.want {
				if !strings.Contains(joined, want) {
					t.Errorf("problems %q, want one with %q", got, want)
				}
			}
		})
	}
}

// TestTokenBinding: a token binding is named after the request by the server, lives
// where the ServiceAccounts do, carries the request's labels and says when its token
// expires at the latest: spec.expiration after now.
func TestTokenBinding(t *testing.T) {
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "reader", UID: "request-1"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Expiration: 3600}}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b := TokenBinding(kr, "cluster-1", now)
	if b.GenerateName != TargetName(kr)+"-" || b.Namespace != operatorv1alpha1.KubeconfigTargetNamespace || b.Labels[operatorv1alpha1.KubeconfigClusterUIDLabel] != "cluster-1" {
		t.Errorf("binding %+v", b.ObjectMeta)
	}
	if got := BindingExpiry(b); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %v, want %v", got, now.Add(time.Hour))
	}
	if got := BindingExpiry(&corev1.Secret{}); !got.IsZero() {
		t.Errorf("a binding that does not say: %v, want zero", got)
	}
}

// TestRequestLabelsOfALongName: a name longer than a label value is left out of the
// labels (the annotation has it); the target name, always a label value, stays.
func TestRequestLabelsOfALongName(t *testing.T) {
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: strings.Repeat("a", 100)}}
	l := RequestLabels(kr, "c")
	if _, ok := l[operatorv1alpha1.KubeconfigRequestNameLabel]; ok || len(l[operatorv1alpha1.KubeconfigRequestLabel]) > 63 || l["app.kubernetes.io/managed-by"] != "trustplane" {
		t.Errorf("labels %v", l)
	}
	if RequestAnnotations(kr)[operatorv1alpha1.KubeconfigRequestAnnotation] != "tenant/"+kr.Name {
		t.Error("the annotation does not name the request in full")
	}
}
