package access

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestCeiling(t *testing.T) {
	c := DefaultCeiling()
	for _, tc := range []struct {
		rule rbacv1.PolicyRule
		want string
	}{
		{rbacv1.PolicyRule{Verbs: []string{"get", "list"}, Resources: []string{"pods"}}, ""},
		{rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}}, `verb "escalate"`},
		{rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}}, `verb "bind"`},
		{rbacv1.PolicyRule{Verbs: []string{"impersonate"}, Resources: []string{"users"}}, `verb "impersonate"`},
		{rbacv1.PolicyRule{Verbs: []string{"*"}, Resources: []string{"pods"}}, `verb "*"`},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"secrets"}}, "secrets or service account tokens is not allowed"},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, "secrets or service account tokens is not allowed"},
		{rbacv1.PolicyRule{Verbs: []string{"create"}, Resources: []string{"serviceaccounts/token"}}, "service account tokens is not allowed"},
		{rbacv1.PolicyRule{Verbs: []string{"create"}, Resources: []string{"serviceaccounts/*"}}, "service account tokens is not allowed"},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"serviceaccounts"}}, ""},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"*"}}, ""},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, ""},
	} {
		got := strings.Join(c.Check([]rbacv1.PolicyRule{tc.rule}), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Check(%+v) = %q, want %q", tc.rule, got, tc.want)
		}
	}
	open := Ceiling{AllowSecrets: true, AllowWildcardVerbs: true}
	if p := open.Check([]rbacv1.PolicyRule{{Verbs: []string{"*"}, Resources: []string{"secrets"}}}); len(p) != 0 {
		t.Errorf("a widened ceiling still refuses: %v", p)
	}
}

func TestKubeconfigRenders(t *testing.T) {
	raw, err := Kubeconfig("target", "https://127.0.0.1:6443", []byte("CA"), "kcr", "tok")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "tok" || string(cfg.CAData) != "CA" {
		t.Errorf("round trip: %+v %v", cfg, err)
	}
}

func TestAdminBindingsAreScopedToTheirCluster(t *testing.T) {
	a, b := AdministratorsOf("kcp", "one"), AdministratorsOf("kcp", "two")
	if a == b || len(a) != 10 {
		t.Fatalf("owners %q %q", a, b)
	}
	ofA := AdminBindings(a, []string{"ann@example.com", "bob@example.com"})
	ofB := AdminBindings(b, []string{"ann@example.com"})
	if len(ofA) != 2 || ofA[0].Name == ofA[1].Name || ofA[0].Name == ofB[0].Name {
		t.Fatalf("names %s %s %s: must differ per user and per Cluster", ofA[0].Name, ofA[1].Name, ofB[0].Name)
	}
	crb := ofA[1]
	if crb.Labels[AdministratorLabel] != a || crb.RoleRef.Name != "cluster-admin" || crb.RoleRef.Kind != "ClusterRole" ||
		len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "User" || crb.Subjects[0].Name != "bob@example.com" {
		t.Errorf("binding %+v", crb)
	}
	if len(crb.Name) > 253 {
		t.Errorf("name %q too long", crb.Name)
	}
}
