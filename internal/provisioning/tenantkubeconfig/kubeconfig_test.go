package tenantkubeconfig

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kc is a kubeconfig with one cluster and one user; cluster and user are extra YAML
// lines of each (indented by the caller's template).
func kc(cluster, user string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u}
clusters:
- name: k
  cluster:
    server: https://api.example.com:6443
    certificate-authority-data: Q0E=
%s
users:
- name: u
  user:
    token: t0ken
%s
`, cluster, user))
}

func TestRefusedFieldsAreNamed(t *testing.T) {
	withExec := Policy{AllowExec: true, ExecCommands: []string{"/usr/local/bin/kubelogin"}, Timeout: time.Second}
	for _, tc := range []struct {
		name, cluster, user string
		policy              Policy
		field               string
	}{
		{"token file", "", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", DefaultPolicy(), "users[0].user.tokenFile"},
		{"client certificate file", "", "    client-certificate: /etc/tls/tls.crt", DefaultPolicy(), "users[0].user.client-certificate"},
		{"client key file", "", "    client-key: /etc/tls/tls.key", DefaultPolicy(), "users[0].user.client-key"},
		{"CA file", "    certificate-authority: /etc/ca.crt", "", DefaultPolicy(), "clusters[0].cluster.certificate-authority"},
		{"proxy", "    proxy-url: http://10.0.0.1:3128", "", DefaultPolicy(), "clusters[0].cluster.proxy-url"},
		{"insecure TLS without the flag", "    insecure-skip-tls-verify: true", "", DefaultPolicy(), "clusters[0].cluster.insecure-skip-tls-verify"},
		{"auth provider", "", "    auth-provider: {name: oidc, config: {idp-issuer-url: https://x}}", DefaultPolicy(), "users[0].user.auth-provider"},
		{"impersonate user", "", "    as: system:admin", DefaultPolicy(), "users[0].user.as"},
		{"impersonate uid", "", "    as-uid: \"0\"", DefaultPolicy(), "users[0].user.as-uid"},
		{"impersonate groups", "", "    as-groups: [system:masters]", DefaultPolicy(), "users[0].user.as-groups"},
		{"impersonate extra", "", "    as-user-extra: {scopes: [all]}", DefaultPolicy(), "users[0].user.as-user-extra"},
		{"basic auth", "", "    username: admin\n    password: pw", DefaultPolicy(), "users[0].user.username"},
		{"exec without the flag", "", "    exec: {command: /bin/sh, args: [-c, 'touch /tmp/x'], apiVersion: client.authentication.k8s.io/v1}", DefaultPolicy(), "users[0].user.exec"},
		{"exec not allowlisted", "", "    exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}", withExec, "users[0].user.exec.command"},
		{"exec relative name of an allowlisted command", "", "    exec: {command: kubelogin, apiVersion: client.authentication.k8s.io/v1}", withExec, "users[0].user.exec.command"},
		{"credentials in the server URL", "", "", DefaultPolicy(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := kc(tc.cluster, tc.user)
			if tc.field == "" { // the server case
				raw = []byte(strings.Replace(string(raw), "https://api.example.com", "https://user:pw@api.example.com", 1))
				tc.field = "clusters[0].cluster.server"
			}
			cfg, err := RESTConfig(raw, tc.policy)
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("got config %v, error %v; want the field %s refused", cfg != nil, err, tc.field)
			}
			if refused.Field != tc.field || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("refused %q (%v), want %q named", refused.Field, err, tc.field)
			}
			if strings.Contains(err.Error(), "t0ken") || strings.Contains(err.Error(), ":pw@") {
				t.Errorf("error %q quotes a credential", err)
			}
		})
	}
}

// A refused field in a user or cluster the current context does not use is refused too.
func TestUnusedEntriesAreChecked(t *testing.T) {
	raw := append(kc("", ""), []byte("- name: other\n  user:\n    tokenFile: /etc/passwd\n")...)
	if _, err := RESTConfig(raw, DefaultPolicy()); err == nil || !strings.Contains(err.Error(), "users[1].user.tokenFile") {
		t.Fatalf("error %v, want users[1].user.tokenFile refused", err)
	}
}

func TestAllowedFormIsUsedAndNothingElse(t *testing.T) {
	raw := kc("    tls-server-name: api.internal", "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ")
	p := DefaultPolicy()
	cfg, err := RESTConfig(raw, p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://api.example.com:6443" || string(cfg.CAData) != "CA" || string(cfg.CertData) != "CERT" || string(cfg.KeyData) != "KEY" ||
		cfg.BearerToken != "t0ken" || cfg.ServerName != "api.internal" {
		t.Errorf("inline fields not carried over: %+v", cfg)
	}
	if cfg.Insecure || cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Impersonate.UserName != "" || cfg.BearerTokenFile != "" ||
		cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.Username != "" {
		t.Errorf("more than the inline fields: %+v", cfg)
	}
	if cfg.Timeout != p.Timeout || cfg.Dial == nil {
		t.Errorf("timeout %v (dial set: %v), want %v on both", cfg.Timeout, cfg.Dial != nil, p.Timeout)
	}
	// HTTPS_PROXY of the manager is never used for a tenant's server.
	t.Setenv("HTTPS_PROXY", "http://proxy.manager.internal:3128")
	req, _ := http.NewRequest(http.MethodGet, cfg.Host, nil)
	if cfg.Proxy == nil {
		t.Fatal("no Proxy func: client-go would fall back to http.ProxyFromEnvironment")
	}
	if u, err := cfg.Proxy(req); u != nil || err != nil {
		t.Errorf("proxy %v (%v) for a tenant's server", u, err)
	}
}

func TestInsecureTLSOnlyWithTheFlag(t *testing.T) {
	raw := []byte(strings.Replace(string(kc("    insecure-skip-tls-verify: true", "")), "    certificate-authority-data: Q0E=\n", "", 1))
	if _, err := RESTConfig(raw, DefaultPolicy()); err == nil {
		t.Fatal("insecure-skip-tls-verify accepted without the flag")
	}
	p := DefaultPolicy()
	p.AllowInsecureTLS = true
	cfg, err := RESTConfig(raw, p)
	if err != nil || !cfg.Insecure {
		t.Fatalf("with --insecure-kubeconfig-tls: insecure %v, error %v", cfg != nil && cfg.Insecure, err)
	}
}

func TestExecOnlyWithTheFlagAndAllowlisted(t *testing.T) {
	exec := "    exec: {command: /usr/local/bin/kubelogin, args: [get-token], env: [{name: A, value: b}], apiVersion: client.authentication.k8s.io/v1}"
	raw := kc("", exec)
	if _, err := RESTConfig(raw, DefaultPolicy()); err == nil {
		t.Fatal("exec accepted without --insecure-kubeconfig-exec")
	}
	p := Policy{AllowExec: true, ExecCommands: []string{"/usr/local/bin/kubelogin"}, Timeout: time.Second}
	cfg, err := RESTConfig(raw, p)
	if err != nil {
		t.Fatal(err)
	}
	ex := cfg.ExecProvider
	if ex == nil || ex.Command != "/usr/local/bin/kubelogin" || len(ex.Args) != 1 || len(ex.Env) != 1 {
		t.Fatalf("exec provider %+v", ex)
	}
	if ex.PluginPolicy.PolicyType != clientcmdapi.PluginPolicyAllowlist || len(ex.PluginPolicy.Allowlist) != 1 || ex.PluginPolicy.Allowlist[0].Command != "/usr/local/bin/kubelogin" {
		t.Errorf("client-go's plugin allowlist not pinned: %+v", ex.PluginPolicy)
	}
	if ex.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
		t.Errorf("interactive mode %q", ex.InteractiveMode)
	}
}

func TestInvalidKubeconfigs(t *testing.T) {
	for name, raw := range map[string]string{
		"not yaml":        "clusters: [this is not",
		"no context":      "apiVersion: v1\nclusters: []\n",
		"relative server": strings.Replace(string(kc("", "")), "https://api.example.com:6443", "api.example.com", 1),
		"file server":     strings.Replace(string(kc("", "")), "https://api.example.com:6443", "file:///etc/passwd", 1),
		"unix socket":     strings.Replace(string(kc("", "")), "https://api.example.com:6443", "unix:///var/run/docker.sock", 1),
	} {
		if _, err := RESTConfig([]byte(raw), DefaultPolicy()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{DefaultPolicy(), ""},
		{Policy{}, "--cluster-target-timeout must be positive"},
		{Policy{Timeout: time.Second, MaxResponseBytes: 1 << 20, MaxInFlight: 1, AllowExec: true}, "--insecure-kubeconfig-exec needs --insecure-kubeconfig-exec-commands"},
		{Policy{Timeout: time.Second, MaxResponseBytes: 1 << 20, MaxInFlight: 1, ExecCommands: []string{"/bin/x"}}, "without --insecure-kubeconfig-exec"},
		{Policy{Timeout: time.Second, MaxResponseBytes: 1 << 20, MaxInFlight: 1, AllowExec: true, ExecCommands: []string{"kubelogin"}}, "not a clean absolute path"},
		{Policy{Timeout: time.Second, MaxResponseBytes: 1000, MaxInFlight: 1}, "--cluster-target-max-response-bytes must be at least 65536"},
		{Policy{Timeout: time.Second, MaxResponseBytes: 1 << 20}, "--cluster-target-max-in-flight must be at least 1"},
	} {
		err := tc.p.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.p, err, tc.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	if got := HostOf(&rest.Config{Host: "https://api.example.com:6443/prefix"}); got != "api.example.com:6443" {
		t.Errorf("host %q", got)
	}
}
