package access

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

func TestCeiling(t *testing.T) {
	c := DefaultCeiling()
	c.ProtectedNamespaces = append(c.ProtectedNamespaces, "trustplane-kubeconfigs")
	rule := func(groups, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	core, all, certs := []string{""}, []string{"*"}, []string{"certificates.k8s.io"}
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
		{"create pods in the tenant's namespace", rule(core, []string{"pods"}, []string{"create"}), "team", `runs pods that may mount any Secret of the namespace as a volume, which reads secrets: not allowed (route "secrets")`},
		{"change deployments in the tenant's namespace", rule([]string{"apps"}, []string{"deployments"}, []string{"patch"}), "team", `route "secrets"`},
		{"read pods in the tenant's namespace", rule(core, []string{"pods"}, []string{"get", "list"}), "team", ""},
		{"delete pods in kube-system", rule(core, []string{"pods"}, []string{"delete"}), "kube-system", `route "protected-namespace-writes"`},
		// Issue 37: every write in kube-system, aws-auth the best known.
		{"update configmaps in kube-system", rule(core, []string{"configmaps"}, []string{"update"}), "kube-system", `any namespaced resource in namespace kube-system`},
		{"read configmaps in kube-system", rule(core, []string{"configmaps"}, []string{"get", "list", "watch"}), "kube-system", ""},
		{"write configmaps cluster-wide", rule(core, []string{"configmaps"}, []string{"create"}), "", `route "protected-namespace-writes"`},
		{"write a custom resource cluster-wide", rule([]string{"example.com"}, []string{"widgets"}, []string{"patch"}), "", `route "protected-namespace-writes"`},
		{"write leases in the tenant's namespace", rule([]string{"coordination.k8s.io"}, []string{"leases"}, []string{"update"}), "team", ""},
		{"write storageclasses cluster-wide", rule([]string{"storage.k8s.io"}, []string{"storageclasses"}, []string{"create"}), "", ""},
		{"write every resource cluster-wide", rule(all, all, []string{"delete"}), "", `route "protected-namespace-writes"`},
		{"nodes/proxy", rule(core, []string{"nodes/proxy"}, []string{"get"}), "", `route "nodes-proxy"`},
		{"nodes/* ", rule(core, []string{"nodes/*"}, []string{"get"}), "", `route "nodes-proxy"`},
		{"read nodes", rule(core, []string{"nodes"}, []string{"get", "list"}), "", ""},
		{"csr approval", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/approval"}, []string{"update"}), "", `route "csr-approval"`},
		{"signers approve", rule([]string{"certificates.k8s.io"}, []string{"signers"}, []string{"approve"}), "", `route "csr-approval"`},
		{"signers sign", rule([]string{"certificates.k8s.io"}, []string{"signers"}, []string{"sign"}), "", `route "csr-signing"`},
		{"csr status", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/status"}, []string{"patch"}), "", `route "csr-signing"`},
		{"create csrs", rule([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests"}, []string{"create", "get"}), "", ""},

		// Issue 21: kube-controller-manager auto-approves node client certificates for
		// whoever may create these subresources.
		{"nodeclient", rule(certs, []string{"certificatesigningrequests/nodeclient"}, []string{"create"}), "", `route "csr-nodeclient"`},
		{"the issue's request", rule(certs, []string{"certificatesigningrequests", "certificatesigningrequests/nodeclient"}, []string{"create"}), "", `route "csr-nodeclient"`},
		{"nodeclient in a role", rule(certs, []string{"certificatesigningrequests/nodeclient"}, []string{"create"}), "team", `route "csr-nodeclient"`},
		{"selfnodeclient", rule(certs, []string{"certificatesigningrequests/selfnodeclient"}, []string{"create"}), "", `route "csr-selfnodeclient"`},
		{"nodeclient through group *", rule(all, []string{"certificatesigningrequests/nodeclient"}, []string{"create"}), "", `route "csr-nodeclient"`},
		{"nodeclient through resource *", rule(certs, all, []string{"create"}), "", `route "csr-nodeclient"`},
		{"selfnodeclient through resource *", rule(certs, all, []string{"create"}), "", `route "csr-selfnodeclient"`},
		{"nodeclient through certificatesigningrequests/*", rule(certs, []string{"certificatesigningrequests/*"}, []string{"create"}), "", `route "csr-nodeclient"`},
		{"selfnodeclient through */selfnodeclient", rule(certs, []string{"*/selfnodeclient"}, []string{"create"}), "", `route "csr-selfnodeclient"`},
		{"nodeclient through verb *", rule(certs, []string{"certificatesigningrequests/nodeclient"}, all), "", `route "csr-nodeclient"`},
		{"nodeclient through everything", rule(all, all, all), "", `route "csr-nodeclient"`},
		{"read nodeclient", rule(certs, []string{"certificatesigningrequests/nodeclient"}, []string{"get"}), "", `route "certificates-other"`},
		{"attest", rule(certs, []string{"signers"}, []string{"attest"}), "", `route "trust-bundles"`},
		{"attest through group *", rule(all, []string{"signers"}, []string{"attest"}), "", `route "trust-bundles"`},
		{"create clustertrustbundles", rule(certs, []string{"clustertrustbundles"}, []string{"create"}), "", `route "trust-bundles"`},
		{"delete clustertrustbundles", rule(certs, []string{"clustertrustbundles"}, []string{"delete"}), "", `route "trust-bundles"`},
		{"read clustertrustbundles", rule(certs, []string{"clustertrustbundles"}, []string{"get", "list", "watch"}), "", ""},
		{"create podcertificaterequests", rule(certs, []string{"podcertificaterequests"}, []string{"create"}), "team", `route "pod-certificates"`},
		{"podcertificaterequests status", rule(certs, []string{"podcertificaterequests/status"}, []string{"update"}), "team", `route "pod-certificates"`},
		{"read podcertificaterequests", rule(certs, []string{"podcertificaterequests"}, []string{"list", "watch"}), "team", ""},
		{"sign through group *", rule(all, []string{"signers"}, []string{"sign"}), "", `route "csr-signing"`},
		{"approve through verb *", rule(certs, []string{"signers"}, all), "", `route "csr-approval"`},

		// Anything else in certificates.k8s.io is refused: it is an allow-list.
		{"update csrs", rule(certs, []string{"certificatesigningrequests"}, []string{"update"}), "", `update on certificatesigningrequests in certificates.k8s.io`},
		{"delete csrs", rule(certs, []string{"certificatesigningrequests"}, []string{"delete"}), "", `route "certificates-other"`},
		{"an unknown subresource", rule(certs, []string{"certificatesigningrequests/kubeletserving"}, []string{"create"}), "", `route "certificates-other"`},
		{"a future resource", rule(certs, []string{"podidentities"}, []string{"get"}), "", `route "certificates-other"`},
		{"read every resource of the group", rule(certs, all, []string{"get"}), "", `get on * in certificates.k8s.io`},
		{"read every subresource of csrs", rule(certs, []string{"certificatesigningrequests/*"}, []string{"get"}), "", `route "certificates-other"`},
		{"read every group", rule(all, all, []string{"list"}), "", `list on * in certificates.k8s.io (through apiGroups "*")`},
		{"a resource in group *", rule(all, []string{"deployments"}, []string{"get"}), "", `route "certificates-other"`},
		{"verb * on csrs", rule(certs, []string{"certificatesigningrequests"}, all), "", `* on certificatesigningrequests in certificates.k8s.io`},
		{"signers get", rule(certs, []string{"signers"}, []string{"get"}), "", `route "certificates-other"`},
		{"csrs in the core group", rule(core, []string{"certificatesigningrequests/nodeclient"}, []string{"create"}), "", ""},
		{"mutating webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations"}, []string{"create"}), "", `route "admission-webhooks"`},
		{"delete validating webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"validatingwebhookconfigurations"}, []string{"delete"}), "", `route "admission-webhooks"`},
		{"read webhooks", rule([]string{"admissionregistration.k8s.io"}, []string{"validatingwebhookconfigurations"}, []string{"get", "list"}), "", ""},
		{"create persistentvolumes", rule(core, []string{"persistentvolumes"}, []string{"create"}), "", `route "persistentvolumes"`},
		{"read persistentvolumes", rule(core, []string{"persistentvolumes"}, []string{"list"}), "", ""},
		// Issue 37: routes to cluster-admin a tenant took with grants the ceiling let through.
		{"update CRDs", rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, []string{"update"}), "", `route "crds"`},
		{"read CRDs", rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, []string{"get", "list"}), "", ""},
		{"create APIServices", rule([]string{"apiregistration.k8s.io"}, []string{"apiservices"}, []string{"create"}), "", `route "apiservices"`},
		{"patch namespaces", rule(core, []string{"namespaces"}, []string{"patch"}), "", `route "namespaces"`},
		{"create namespaces", rule(core, []string{"namespaces"}, []string{"create"}), "", `route "namespaces"`},
		{"list namespaces", rule(core, []string{"namespaces"}, []string{"list"}), "", ""},
		{"write endpoints", rule(core, []string{"endpoints"}, []string{"update"}), "team", `route "endpoints"`},
		{"write endpointslices", rule([]string{"discovery.k8s.io"}, []string{"endpointslices"}, []string{"create"}), "team", `route "endpoints"`},
		{"read endpointslices", rule([]string{"discovery.k8s.io"}, []string{"endpointslices"}, []string{"list"}), "team", ""},
		{"services/proxy", rule(core, []string{"services/proxy"}, []string{"get"}), "team", `route "proxies"`},
		{"pods/proxy through pods/*", rule(core, []string{"pods/*"}, []string{"get"}), "team", `route "proxies"`},
		{"namespaces through verb *", rule(core, []string{"namespaces"}, all), "", `route "namespaces"`},
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

// TestCertificatesRoutesAreAllowedByName: in certificates.k8s.io each permission a route
// names passes once that route is allowed, without certificates-other; a wildcard needs
// certificates-other too, since it also grants what the group adds later.
func TestCertificatesRoutesAreAllowedByName(t *testing.T) {
	certs := func(resource string, verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{resource}, Verbs: verbs}}
	}
	for _, tc := range []struct {
		route     string
		rules     []rbacv1.PolicyRule
		namespace string // of a Role; "": cluster-wide
	}{
		{"csr-nodeclient", certs("certificatesigningrequests/nodeclient", "create"), ""},
		{"csr-selfnodeclient", certs("certificatesigningrequests/selfnodeclient", "create"), ""},
		{"csr-approval", certs("certificatesigningrequests/approval", "update", "patch"), ""},
		{"csr-approval", certs("signers", "approve"), ""},
		{"csr-signing", certs("certificatesigningrequests/status", "update"), ""},
		{"trust-bundles", certs("signers", "attest"), ""},
		{"trust-bundles", certs("clustertrustbundles", "create", "update", "delete"), ""},
		// Namespaced: cluster-wide, they would write in kube-system too.
		{"pod-certificates", certs("podcertificaterequests", "create"), "team"},
		{"pod-certificates", certs("podcertificaterequests/status", "patch"), "team"},
		{"certificates-other", certs("certificatesigningrequests", "update", "delete"), ""},
	} {
		c := DefaultCeiling()
		denied := strings.Join(c.Check(tc.rules, tc.namespace), "; ")
		if !strings.Contains(denied, `route "`+tc.route+`"`) {
			t.Errorf("%v by default: %q, want route %q", tc.rules[0], denied, tc.route)
		}
		c.Allow = []string{tc.route}
		if p := c.Check(tc.rules, tc.namespace); len(p) != 0 {
			t.Errorf("%v with %s allowed: %v", tc.rules[0], tc.route, p)
		}
	}

	named := DefaultCeiling()
	named.Allow = []string{"csr-nodeclient", "csr-selfnodeclient", "csr-approval", "csr-signing"}
	if p := strings.Join(named.Check(certs("certificatesigningrequests/*", "create"), ""), "; "); !strings.Contains(p, `route "certificates-other"`) || strings.Contains(p, "csr-nodeclient") {
		t.Errorf("certificatesigningrequests/* with every CSR route allowed: %q, want certificates-other only", p)
	}
	other := DefaultCeiling()
	other.Allow = []string{"certificates-other"}
	if p := strings.Join(other.Check(certs("certificatesigningrequests/*", "create"), ""), "; "); strings.Contains(p, "certificates-other") || !strings.Contains(p, "csr-nodeclient") {
		t.Errorf("certificatesigningrequests/* with certificates-other allowed: %q, want the named routes still", p)
	}
}

func TestKubeconfigRenders(t *testing.T) {
	at := Endpoint{Server: "https://127.0.0.1:6443", CAData: []byte("CA"), TLSServerName: "api.internal"}
	raw, err := Kubeconfig("target", at, "kcr", "tok")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "tok" || string(cfg.CAData) != "CA" || cfg.ServerName != "api.internal" {
		t.Errorf("round trip: %+v %v", cfg, err)
	}
	if got, err := EndpointOf(raw); err != nil || got.Moved(at) != "" {
		t.Errorf("EndpointOf: %+v %v, want %+v", got, err, at)
	}
}

// TestBoundSecretOf reads the binding and the credential ID from a token shaped as kube-apiserver issues a
// Secret-bound one (pkg/serviceaccount/claims.go), and nothing from any other token.
func TestBoundSecretOf(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(claims any) string {
		token, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "system:serviceaccount:ns:sa"}).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	bound := sign(map[string]any{"jti": "6f1c0b7e-2d4a-4c41-9a0e-0d1f5e7b9c21", "kubernetes.io": map[string]any{"namespace": "ns",
		"secret": map[string]any{"name": "kcr-team-reader-x7k2p", "uid": "1"}, "serviceaccount": map[string]any{"name": "sa", "uid": "2"}}})
	podBound := sign(map[string]any{"kubernetes.io": map[string]any{"namespace": "ns", "pod": map[string]any{"name": "p", "uid": "3"}}})
	for _, tc := range []struct{ name, token, want string }{
		{"bound to a Secret", bound, "kcr-team-reader-x7k2p"},
		{"bound to a pod", podBound, ""},
		{"not a JWT", "tok", ""},
		{"empty", "", ""},
	} {
		raw, err := Kubeconfig("target", Endpoint{Server: "https://127.0.0.1:6443"}, "kcr", tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if got := BoundSecretOf(raw); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		// The credential ID as kube-apiserver's audit log writes it: only the bound
		// token has a jti.
		wantID := map[bool]string{true: "JTI=6f1c0b7e-2d4a-4c41-9a0e-0d1f5e7b9c21"}[tc.token == bound]
		if got := KubeconfigClaims(raw).CredentialID; got != wantID {
			t.Errorf("%s: credential ID %q, want %q", tc.name, got, wantID)
		}
	}
	if got := BoundSecretOf([]byte("current-context: nowhere")); got != "" {
		t.Errorf("a kubeconfig without its context: %q", got)
	}
}

// TestEndpointMoved: every part of where a kubeconfig reaches its cluster counts, and the
// words name the hosts at most, never a URL's path or the CA bundle's content.
func TestEndpointMoved(t *testing.T) {
	issued := Endpoint{Server: "https://127.0.0.1:6443/secret-path", CAData: []byte("CA one")}
	for _, tc := range []struct {
		name string
		now  Endpoint
		want string
	}{
		{"nothing", issued, ""},
		{"port", Endpoint{Server: "https://127.0.0.1:7443/secret-path", CAData: []byte("CA one")}, "the server moved from 127.0.0.1:6443 to 127.0.0.1:7443"},
		{"host", Endpoint{Server: "https://localhost:6443/secret-path", CAData: []byte("CA one")}, "the server moved from 127.0.0.1:6443 to localhost:6443"},
		{"path only", Endpoint{Server: "https://127.0.0.1:6443/other", CAData: []byte("CA one")}, "the server's URL at 127.0.0.1:6443 changed"},
		{"CA", Endpoint{Server: issued.Server, CAData: []byte("CA two")}, "the CA bundle changed"},
		{"TLS server name", Endpoint{Server: issued.Server, CAData: []byte("CA one"), TLSServerName: "api"}, "the TLS server name changed"},
		{"all", Endpoint{Server: "https://api.example:443", TLSServerName: "api"}, "the server moved from 127.0.0.1:6443 to api.example:443, the CA bundle changed, the TLS server name changed"},
	} {
		got := issued.Moved(tc.now)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if strings.Contains(got, "secret-path") || strings.Contains(got, "CA one") || strings.Contains(got, "CA two") {
			t.Errorf("%s: %q tells more than the hosts", tc.name, got)
		}
	}
	if _, err := EndpointOf([]byte("current-context: nowhere")); err == nil {
		t.Error("EndpointOf a kubeconfig without its context: no error")
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
	if crb.Labels[operatorv1alpha1.AdministratorLabel] != a || crb.RoleRef.Name != "cluster-admin" || crb.RoleRef.Kind != "ClusterRole" ||
		len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "User" || crb.Subjects[0].Name != "bob@example.com" {
		t.Errorf("binding %+v", crb)
	}
	if len(crb.Name) > 253 {
		t.Errorf("name %q too long", crb.Name)
	}
}

// TestWorkloadsRunOnlyWherePodSecurityHoldsThem: with secrets allowed, a Role may create
// pods only in a namespace enforcing Pod Security baseline or restricted, and only while
// the ceiling refuses namespace writes (which could change that level); the operator may
// allow workloads anywhere by name.
func TestWorkloadsRunOnlyWherePodSecurityHoldsThem(t *testing.T) {
	pods := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}}
	reads := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	c := DefaultCeiling()
	c.AllowSecrets = true
	if p := c.Check(pods, "team"); len(p) != 0 {
		t.Fatalf("pods create with secrets allowed: %v", p)
	}
	if !WritesWorkloads(pods) || WritesWorkloads(reads) {
		t.Error("WritesWorkloads does not tell a pod create from a read")
	}
	for enforce, want := range map[string]string{
		"":           `does not enforce Pod Security baseline or restricted (pod-security.kubernetes.io/enforce=""): its pods could be privileged, share the host's namespaces or mount its filesystem: not allowed (route "workloads")`,
		"privileged": `(pod-security.kubernetes.io/enforce="privileged")`,
		"Baseline":   `route "workloads"`,
		"baseline":   "",
		"restricted": "",
	} {
		got := strings.Join(c.PodSecurity(pods, "team", enforce), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("enforce=%q: %q, want %q", enforce, got, want)
		}
	}
	if p := c.PodSecurity(reads, "team", ""); len(p) != 0 {
		t.Errorf("reading pods needs no Pod Security: %v", p)
	}
	relabel := c
	relabel.Allow = []string{"namespaces"}
	if p := strings.Join(relabel.PodSecurity(pods, "team", "restricted"), "; "); !strings.Contains(p, `whose Pod Security level may be changed (route "namespaces" is allowed)`) {
		t.Errorf("with namespace writes allowed: %q", p)
	}
	anywhere := c
	anywhere.Allow = []string{"workloads"}
	if p := anywhere.PodSecurity(pods, "team", "privileged"); len(p) != 0 {
		t.Errorf("with workloads allowed: %v", p)
	}
}
