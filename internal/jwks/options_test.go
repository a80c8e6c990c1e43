package jwks

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: every flag is checked before the manager is built, and the error
// names the flag.
func TestOptionsValidate(t *testing.T) {
	if err := (&Options{}).Validate(); err == nil {
		t.Error("zero Options pass")
	}
	base := DefaultOptions()
	base.IssuerClaimNamespace = "trustplane-system"
	if err := base.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		flag   string
		change func(*Options)
	}{
		{"", func(o *Options) { o.ServerBindAddress = "0" }},
		{"", func(o *Options) { o.ServerBindAddress = "127.0.0.1:0" }},
		{"", func(o *Options) {
			o.MinUpdateInterval, o.MaxCacheMaxAge, o.NginxMaxReplicas, o.ServerMaxConnections = 0, 0, 0, 0
		}},
		{"", func(o *Options) {
			o.IssuerNamespaces, o.ServerHosts, o.TrustedProxies = []string{"idp.example/a=team-a"}, []string{"jwks.internal"}, []string{"10.0.0.0/8", "192.0.2.1"}
		}},
		{"--jwks-workers", func(o *Options) { o.Workers = 0 }},
		{"--jwks-min-update-interval", func(o *Options) { o.MinUpdateInterval = -time.Second }},
		{"--jwks-retry-base-delay", func(o *Options) { o.RetryBaseDelay = 0 }},
		{"--jwks-retry-max-delay", func(o *Options) { o.RetryMaxDelay = -time.Second }},
		{"--jwks-retry-max-delay", func(o *Options) { o.RetryBaseDelay, o.RetryMaxDelay = time.Minute, time.Second }},
		{"--jwks-max-cache-max-age", func(o *Options) { o.MaxCacheMaxAge = -time.Hour }},
		{"--jwks-promotion-margin", func(o *Options) { o.PromotionMargin = -time.Second }},
		{"--jwks-server-read-timeout", func(o *Options) { o.ServerReadTimeout = 0 }},
		{"--jwks-server-write-timeout", func(o *Options) { o.ServerWriteTimeout = -1 }},
		{"--jwks-server-idle-timeout", func(o *Options) { o.ServerIdleTimeout = 0 }},
		{"--jwks-nginx-image", func(o *Options) { o.NginxImage = "" }},
		{"--jwks-nginx-max-replicas", func(o *Options) { o.NginxMaxReplicas = -1 }},
		{"--jwks-nginx-max-resources", func(o *Options) { o.NginxMaxResources = map[string]string{"cpu": "lots"} }},
		{"--jwks-issuer-claim-namespace", func(o *Options) { o.IssuerClaimNamespace = "" }},
		{"--jwks-issuer-claim-namespace", func(o *Options) { o.IssuerClaimNamespace = "Not_A_Namespace" }},
		{"--jwks-issuer-namespaces", func(o *Options) { o.IssuerNamespaces = []string{"idp.example"} }},
		{"--jwks-server-hosts", func(o *Options) { o.ServerHosts = []string{"bad host"} }},
		{"--jwks-server-bind-address", func(o *Options) { o.ServerBindAddress = "8082" }},
		{"--jwks-server-bind-address", func(o *Options) { o.ServerBindAddress = ":99999" }},
		{"--jwks-server-trusted-proxies", func(o *Options) { o.TrustedProxies = []string{"10.0.0.0/99"} }},
		{"--jwks-server-max-header-bytes", func(o *Options) { o.ServerMaxHeaderBytes = 0 }},
		{"--jwks-server-max-connections", func(o *Options) { o.ServerMaxConnections = -1 }},
	} {
		o := base
		tc.change(&o)
		err := o.Validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("valid options refused: %v", err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("want an error naming %s, got %v", tc.flag, err)
		}
	}
}
