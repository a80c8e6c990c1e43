package access

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestCeiling(t *testing.T) {
	c := DefaultCeiling()
	c.ProtectedNamespaces = append(c.ProtectedNamespaces, "trustplane-kubeconfigs")
	rule := func(groups, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	core, all := []string{""}, []string{"*"}
	for _, tc := range []struct {
		name      string
		rule      rbacv1.PolicyRule
		namespace string // "" cluster-wide
		want      string // "" allowed; else a part of the denial
	}{
		{"read pods", rbacv1.PolicyRule{Verbs: []string{"get", "list"}, Resources: []string{"pods"}}, "", ""},
		{"escalate", rule([]string{"rbac.authorization.k8s.io"}, []string{"roles"}, []string{"escalate"}), "", `verb "escalate"`},
		{"bind", rule([]string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, []string{"bind"}), "", `verb "bind"`},
		{"impersonate", rule(core, []string{"users"}, []string{"impersonate"}), "", `verb "impersonate"`},
		{"impersonate in a role", rule(core, []string{"serviceaccounts"}, []string{"impersonate"}), "team", `verb "impersonate"`},
		{"verb wildcard", rule(core, []string{"configmaps"}, all), "team", `verb "*"`},
		{"secrets", rule(core, []string{"secrets"}, []string{"get"}), "team", `route "secrets"`},
		{"everything", rule(all, all, []string{"get"}), "", `route "secrets"`},
		{"serviceaccounts/token", rule(core, []string{"serviceaccounts/token"}, []string{"create"}), "team", `route "serviceaccount-token"`},
		{"serviceaccounts/*", rule(core, []string{"serviceaccounts/*"}, []string{"create"}), "team", `route "serviceaccount-token"`},
		{"*/token", rule(core, []string{"*/token"}, []string{"create"}), "team", `route "serviceaccount-token"`},
		{"read serviceaccounts", rule(core, []string{"serviceaccounts"}, []string{"get"}), "", ""},
		{"read apps", rule([]string{"apps"}, all, []string{"get"}), "", ""},
		{"healthz", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, "", ""},

		{"exec in kube-system", rule(core, []string{"pods/exec"}, []string{"create", "get"}), "kube-system", `route "pods-exec"`},
		{"exec where the ServiceAccounts are", rule(core, []string{"pods/exec"}, []string{"create"}), "trustplane-kubeconfigs", `route "pods-exec"`},
		{"exec cluster-wide", rule(core, []string{"pods/exec"}, []string{"get"}), "", `route "pods-exec"`},
		{"exec through */exec", rule(core, []string{"*/exec"}, []string{"create"}), "kube-system", `route "pods-exec"`},
		{"exec through pods/*", rule(core, []string{"pods/*"}, []string{"create"}), "kube-system", `route "pods-exec"`},
		{"exec in the tenant's namespace", rule(core, []string{"pods/exec"}, []string{"create"}), "team", ""},
		{"attach in kube-system", rule(core, []string{"pods/attach"}, []string{"create"}), "kube-system", `route "pods-attach"`},
		{"portforward cluster-wide", rule(core, []string{"pods/portforward"}, []string{"create"}), "", `route "pods-portforward"`},
		{"ephemeral containers in kube-system", rule(core, []string{"pods/ephemeralcontainers"}, []string{"patch"}), "kube-system", `route "pods-ephemeralcontainers"`},
		{"create pods in kube-system", rule(core, []string{"pods"}, []string{"create"}), "kube-system", `route "workloads"`},
		{"update pods where the ServiceAccounts are", rule(core, []string{"pods"}, []string{"update"}), "trustplane-kubeconfigs", `route "workloads"`},
		{"patch deployments cluster-wide", rule([]string{"apps"}, []string{"deployments"}, []string{"patch"}), "", `route "workloads"`},
		{"create cronjobs in kube-system", rule([]string{"batch"}, []string{"cronjobs"}, []string{"create"}), "kube-system", `route "workloads"`},
		{"create anything in group * in kube-system", rule(all, all, []string{"create"}), "kube-system", `route "workloads"`},
		{"create pods in the tenant's namespace", rule(core, []string{"pods"}, []string{"create"}), "team", ""},
		{"delete pods in kube-system", rule(core, []string{"pods"}, []string{"delete"}), "kube-system", ""},
		{"nodes/proxy", rule(core, []string{"nodes/proxy"}, []string{"get"}), "", `route "nodes-proxy"`},
		{"nodes/* ", rule(core, []string{"nodes/*"}, []string{"get"}), "", `route "nodes-proxy"`},
		{"read nodes", rule(core, []string{"nodes"}, []string{"get", "list"}), "", ""},
		{"csr approval", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/approval"}, []string{"update"}), "", `route "csr-approval"`},
		{"signers approve", rule([]string{"certificates.k8s.io"}, []string{"signers"}, []string{"approve"}), "", `route "csr-approval"`},
		{"signers sign", rule([]string{"certificates.k8s.io"}, []string{"signers"}, []string{"sign"}), "", `route "csr-signing"`},
		{"csr status", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/status"}, []string{"patch"}), "", `route "csr-signing"`},
		{"create csrs", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests"}, []string{"create", "get"}), "", ""},
		{"mutating webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations"}, []string{"create"}), "", `route "admission-webhooks"`},
		{"delete validating webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"validatingwebhookconfigurations"}, []string{"delete"}), "", `route "admission-webhooks"`},
		{"read webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"validatingwebhookconfigurations"}, []string{"get", "list"}), "", ""},
		{"create persistentvolumes", rule(core, []string{"persistentvolumes"}, []string{"create"}), "", `route "persistentvolumes"`},
		{"read persistentvolumes", rule(core, []string{"persistentvolumes"}, []string{"list"}), "", ""},
	} {
		got := strings.Join(c.Check([]rbacv1.PolicyRule{tc.rule}, tc.namespace), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Check(%+v, %q) = %q, want %q", tc.name, tc.rule, tc.namespace, got, tc.want)
		}
	}
}

// TestCeilingAllowsWhatTheOperatorAllows: each route is let through when named, and only
// that route.
func TestCeilingAllowsWhatTheOperatorAllows(t *testing.T) {
	open := Ceiling{AllowSecrets: true, AllowWildcardVerbs: true}
	if p := open.Check([]rbacv1.PolicyRule{{Verbs: []string{"*"}, Resources: []string{"secrets"}}}, "team"); len(p) != 0 {
		t.Errorf("a widened ceiling still refuses: %v", p)
	}
	exec := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec", "nodes/proxy"}, Verbs: []string{"get"}}}
	c := DefaultCeiling()
	c.Allow = []string{"pods-exec"}
	if p := strings.Join(c.Check(exec, ""), "; "); strings.Contains(p, "pods-exec") || !strings.Contains(p, "nodes-proxy") {
		t.Errorf("allowing pods-exec: %q", p)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	c.Allow = []string{"pods/exec"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `route "pods/exec" is unknown`) {
		t.Errorf("Validate: %v", err)
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
