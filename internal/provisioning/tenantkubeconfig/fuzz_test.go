package tenantkubeconfig

import (
	"errors"
	"net/url"
	"testing"
)

// FuzzRESTConfig: whatever a tenant stores as a brought-along Cluster's kubeconfig, the
// default policy either refuses it (ErrInvalid, or a *RefusedError naming a field) or
// builds a config that reaches an https server with compression off, no proxy, TLS
// verified, and no exec plugin: what the policy promises, never a panic.
func FuzzRESTConfig(f *testing.F) {
	f.Add([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: "AAAA"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`))
	f.Add([]byte(`clusters: [{name: c, cluster: {server: "http://a", insecure-skip-tls-verify: true, proxy-url: "http://p"}}]
users: [{name: u, user: {exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := DefaultPolicy()
		cfg, err := RESTConfig(raw, p)
		if err != nil {
			var refusedErr *RefusedError
			if !errors.Is(err, ErrInvalid) && !errors.As(err, &refusedErr) {
				t.Fatalf("an unclassified error: %v", err)
			}
			return
		}
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			t.Fatalf("host %q (%v)", cfg.Host, err)
		}
		if !cfg.DisableCompression || cfg.Insecure || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("the config breaks the default policy: compression off %v, insecure %v, exec %v", cfg.DisableCompression, cfg.Insecure, cfg.ExecProvider)
		}
		if proxy, _ := cfg.Proxy(nil); proxy != nil {
			t.Fatalf("a proxy: %v", proxy)
		}
	})
}
