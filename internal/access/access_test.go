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
		{rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"secrets"}}, "secrets is not allowed"},
		{rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, "secrets is not allowed"},
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
