package jwkset

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

func TestSpecAccessors(t *testing.T) {
	for _, tc := range []struct {
		name               string
		spec               jwksv1alpha1.JWKSConfigSpec
		configMap, nginxCM string
		nginx              bool
		maxAge             time.Duration
		policy             Policy
		issuerKey          string
	}{
		{name: "defaults", configMap: "idp-jwks", nginxCM: "idp-nginx", nginx: true, maxAge: 5 * time.Minute,
			policy: Policy{KeepOldKeys: true, OldKeysTTL: 720 * time.Hour, MaxKeys: 3}},
		{name: "names", spec: jwksv1alpha1.JWKSConfigSpec{ConfigMapName: "set", NginxConfigMapName: "conf"},
			configMap: "set", nginxCM: "conf", nginx: true, maxAge: 5 * time.Minute, policy: Policy{KeepOldKeys: true, OldKeysTTL: 720 * time.Hour, MaxKeys: 3}},
		{name: "set fields", spec: jwksv1alpha1.JWKSConfigSpec{CacheMaxAge: jwksv1alpha1.DurationOf(time.Minute), OldKeysTTL: jwksv1alpha1.DurationOf(time.Hour),
			MaxKeys: ptr.To[int32](5), KeepOldKeys: ptr.To(false), Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}},
			configMap: "idp-jwks", nginxCM: "idp-nginx", maxAge: time.Minute, policy: Policy{OldKeysTTL: time.Hour, MaxKeys: 5}},
		{name: "immediate keeps no old key", spec: jwksv1alpha1.JWKSConfigSpec{UpdateStrategy: jwksv1alpha1.UpdateStrategyImmediate, KeepOldKeys: ptr.To(true)},
			configMap: "idp-jwks", nginxCM: "idp-nginx", nginx: true, maxAge: 5 * time.Minute, policy: Policy{OldKeysTTL: 720 * time.Hour, MaxKeys: 3}},
		{name: "invalid durations fall back to the defaults", spec: jwksv1alpha1.JWKSConfigSpec{CacheMaxAge: ptr.To(jwksv1alpha1.Duration("30d")), OldKeysTTL: ptr.To(jwksv1alpha1.Duration("x"))},
			configMap: "idp-jwks", nginxCM: "idp-nginx", nginx: true, maxAge: 5 * time.Minute, policy: Policy{KeepOldKeys: true, OldKeysTTL: 720 * time.Hour, MaxKeys: 3}},
		{name: "issuer", spec: jwksv1alpha1.JWKSConfigSpec{Issuer: "https://IdP.example:443/bob/"},
			configMap: "idp-jwks", nginxCM: "idp-nginx", nginx: true, maxAge: 5 * time.Minute, policy: Policy{KeepOldKeys: true, OldKeysTTL: 720 * time.Hour, MaxKeys: 3}, issuerKey: "idp.example/bob"},
		{name: "an issuer that does not parse has no key", spec: jwksv1alpha1.JWKSConfigSpec{Issuer: "http://idp.example"},
			configMap: "idp-jwks", nginxCM: "idp-nginx", nginx: true, maxAge: 5 * time.Minute, policy: Policy{KeepOldKeys: true, OldKeysTTL: 720 * time.Hour, MaxKeys: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &jwksv1alpha1.JWKSConfig{Spec: tc.spec}
			c.Name = "idp"
			if got := ConfigMapName(c); got != tc.configMap {
				t.Errorf("ConfigMapName = %q, want %q", got, tc.configMap)
			}
			if got := NginxConfigMapName(c); got != tc.nginxCM {
				t.Errorf("NginxConfigMapName = %q, want %q", got, tc.nginxCM)
			}
			if got := NginxEnabled(c); got != tc.nginx {
				t.Errorf("NginxEnabled = %v, want %v", got, tc.nginx)
			}
			if got := CacheMaxAge(c); got != tc.maxAge {
				t.Errorf("CacheMaxAge = %v, want %v", got, tc.maxAge)
			}
			if got := PolicyOf(c); got != tc.policy {
				t.Errorf("PolicyOf = %+v, want %+v", got, tc.policy)
			}
			if got := IssuerKeyOf(c); got != tc.issuerKey {
				t.Errorf("IssuerKeyOf = %q, want %q", got, tc.issuerKey)
			}
		})
	}
}

func TestSplitIssuerKeyAndCanonicalRoute(t *testing.T) {
	for _, tc := range []struct {
		key, host, path string
		ns, name        string
		canonical       bool
	}{
		{key: "idp.example", host: "idp.example"},
		{key: "idp.example/bob", host: "idp.example", path: "/bob"},
		{key: "idp.example/bob/idp", host: "idp.example", path: "/bob/idp", ns: "bob", name: "idp", canonical: true},
		{key: "idp.example/bob/idp/x", host: "idp.example", path: "/bob/idp/x"},
		{key: "[::1]/a/b", host: "[::1]", path: "/a/b", ns: "a", name: "b", canonical: true},
	} {
		host, path := SplitIssuerKey(tc.key)
		if host != tc.host || path != tc.path {
			t.Errorf("SplitIssuerKey(%q) = %q, %q; want %q, %q", tc.key, host, path, tc.host, tc.path)
		}
		ns, name, ok := CanonicalRoute(path)
		if ok != tc.canonical || ok && (ns != tc.ns || name != tc.name) {
			t.Errorf("CanonicalRoute(%q) = %q, %q, %v; want %q, %q, %v", path, ns, name, ok, tc.ns, tc.name, tc.canonical)
		}
	}
	for _, path := range []string{"", "/", "//x", "/x/", "x/y", "/x//"} {
		if ns, name, ok := CanonicalRoute(path); ok {
			t.Errorf("CanonicalRoute(%q) = %q, %q: not a route of two segments", path, ns, name)
		}
	}
}
