package jwks

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/version"
)

// DefaultNginxImage is --jwks-nginx-image's default.
const DefaultNginxImage = version.ImageRepository + "/jwks-nginx:" + version.ImageTag

// Options are the controller's flags.
type Options struct {
	// Workers is the number of concurrent reconciles. A reconcile spends its time waiting
	// for the API server (the Secret, the ConfigMap write, its own cache, the status), not
	// on CPU: 32, as the kubeconfig controller runs, keeps a burst of new sets (a namespace
	// of them applied at once) close to what the API server takes (make bench-jwks);
	// API Priority and Fairness, not the worker count, protects the server.
	Workers int
	// MinUpdateInterval is the least time between two updates of one published set.
	MinUpdateInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff of transient errors.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// ServerBindAddress is where trustplane serves every set; "0" turns it off.
	ServerBindAddress string
	// NginxImage is the image of the nginx Deployments; it must run as a non-root user
	// (uid 101, as the jwks-nginx image of make images and nginxinc/nginx-unprivileged do)
	// and listen on 8080.
	NginxImage string
	// IssuerNamespaces bind issuer hosts or path prefixes to namespaces
	// ("host[/path]=namespace").
	IssuerNamespaces []string
	// IssuerClaimNamespace holds the issuer claims (the manager's namespace).
	IssuerClaimNamespace string
	// TrustedProxies are the CIDRs whose X-Forwarded-Host the JWKS server believes.
	TrustedProxies []string
	// ServerHosts are the JWKS server's own host names (its Service's DNS names, say):
	// answered by issuer path alone, for proxies that rewrite Host; no issuer may name them.
	ServerHosts []string
	// ServerReadTimeout, ServerWriteTimeout and ServerIdleTimeout bound how long the JWKS
	// server waits for a request, takes to answer, and keeps an idle connection open.
	ServerReadTimeout, ServerWriteTimeout, ServerIdleTimeout time.Duration
	// ServerMaxHeaderBytes caps a request's headers; ServerMaxConnections the connections
	// open at once (more wait to be accepted).
	ServerMaxHeaderBytes, ServerMaxConnections int
	// MaxCacheMaxAge bounds spec.cacheMaxAge, and is how long a released issuer stays
	// with its namespace.
	MaxCacheMaxAge time.Duration
	// NginxMaxReplicas bounds spec.nginx.replicas.
	NginxMaxReplicas int32
	// NginxMaxResources bounds the nginx container's requests and limits, by name.
	NginxMaxResources map[string]string
	// PromotionMargin is added to cacheMaxAge before a served key is copied to
	// spec.signingSecret.
	PromotionMargin time.Duration
	// RelyingPartyHosts are the hosts whose metrics a JWKSConfig's spec.promotion may
	// name (exact names, or *.suffix); none: spec.promotion is refused. The manager makes
	// these requests from inside the cluster, so a tenant may not point it anywhere.
	RelyingPartyHosts []string
	// RelyingPartyScrapeInterval is how often the relying parties are probed and read
	// while a key is pending.
	RelyingPartyScrapeInterval time.Duration
	// Clock is the time source (tests inject a fake one).
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		Workers:                    32,
		MinUpdateInterval:          time.Minute,
		RetryBaseDelay:             5 * time.Second,
		RetryMaxDelay:              5 * time.Minute,
		ServerBindAddress:          ":8082",
		NginxImage:                 DefaultNginxImage,
		IssuerClaimNamespace:       manager.OwnNamespace(),
		MaxCacheMaxAge:             24 * time.Hour,
		NginxMaxReplicas:           5,
		PromotionMargin:            time.Minute,
		RelyingPartyScrapeInterval: 10 * time.Second,
		ServerReadTimeout:          10 * time.Second,
		ServerWriteTimeout:         10 * time.Second,
		ServerIdleTimeout:          30 * time.Second,
		ServerMaxHeaderBytes:       16 << 10,
		ServerMaxConnections:       1000,
		NginxMaxResources:          map[string]string{"cpu": "1", "memory": "512Mi", "ephemeral-storage": "1Gi"},
		Clock:                      clock.RealClock{},
	}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "jwks-workers", o.Workers, "Concurrent JWKSConfig reconciles.")
	fs.DurationVar(&o.MinUpdateInterval, "jwks-min-update-interval", o.MinUpdateInterval, "Least time between two updates of one JWK Set; the first change after a quiet period is published at once, the rest of a burst in one write at the end of the interval. 0 disables.")
	fs.DurationVar(&o.RetryBaseDelay, "jwks-retry-base-delay", o.RetryBaseDelay, "First retry delay after a transient error; doubles on each failure.")
	fs.DurationVar(&o.RetryMaxDelay, "jwks-retry-max-delay", o.RetryMaxDelay, "Longest retry delay after transient errors.")
	fs.StringVar(&o.NginxImage, "jwks-nginx-image", o.NginxImage, "Image of the nginx Deployments that serve JWK Sets (non-root, uid 101, listening on 8080). An operator setting: JWKSConfig authors cannot choose what runs.")
	o.AddServerFlags(fs)
	fs.DurationVar(&o.PromotionMargin, "jwks-promotion-margin", o.PromotionMargin, "With spec.signingSecret: how long after cacheMaxAge a key served by trustplane is copied to the signing Secret; covers the watch latency of the other replicas and kubelet's refresh of nginx's ConfigMap volume.")
	fs.StringSliceVar(&o.RelyingPartyHosts, "jwks-relying-party-hosts", o.RelyingPartyHosts, "Hosts (exact, or *.example.com) whose /metrics a JWKSConfig's spec.promotion.relyingParties may name; the manager reads them from inside the cluster, so tenants may name no other. Empty: promotion on proof is off, keys are promoted by the timer.")
	fs.DurationVar(&o.RelyingPartyScrapeInterval, "jwks-relying-party-scrape-interval", o.RelyingPartyScrapeInterval, "While a key is pending: how often each relying party of spec.promotion is probed and its JWKS fetch metrics read.")
	fs.Int32Var(&o.NginxMaxReplicas, "jwks-nginx-max-replicas", o.NginxMaxReplicas, "Most nginx replicas a JWKSConfig may ask for (more stall with OverLimit). 0: no limit.")
	fs.StringToStringVar(&o.NginxMaxResources, "jwks-nginx-max-resources", o.NginxMaxResources, "Largest request or limit of the nginx container a JWKSConfig may ask for, per resource; resources not named may not be asked for (e.g. cpu=1,memory=512Mi,ephemeral-storage=1Gi).")
}

// AddServerFlags registers the flags of the JWKS server and of the issuer claims it
// honours: what `trustplane jwks-server` takes, and the manager too.
func (o *Options) AddServerFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ServerBindAddress, "jwks-server-bind-address", o.ServerBindAddress, "Address of trustplane's own JWKS server (/<namespace>/<name>/jwks.json); '0' disables it.")
	fs.StringSliceVar(&o.IssuerNamespaces, "jwks-issuer-namespaces", o.IssuerNamespaces, "Issuer hosts or path prefixes bound to one namespace, as host[/path]=namespace (e.g. idp.example.com/teams/a=team-a): only JWKSConfigs of that namespace may serve issuers under it (the longest prefix decides; a host covers every port). Other issuers go to the first JWKSConfig that claims them.")
	fs.StringVar(&o.IssuerClaimNamespace, "jwks-issuer-claim-namespace", o.IssuerClaimNamespace, "Namespace of the ConfigMaps that record which JWKSConfig serves an issuer (jwks-issuer-*); tenants must not be able to write there. Default: the manager's own namespace.")
	fs.DurationVar(&o.MaxCacheMaxAge, "jwks-max-cache-max-age", o.MaxCacheMaxAge, "Longest spec.cacheMaxAge a JWKSConfig may ask for (longer ones stall with OverLimit, and no server sends more); also how long an issuer given up by a namespace stays with it. 0: no limit.")
	fs.StringSliceVar(&o.TrustedProxies, "jwks-server-trusted-proxies", o.TrustedProxies, "CIDRs (or addresses) of the proxies whose X-Forwarded-Host the JWKS server believes, e.g. 10.0.0.0/8; from any other peer only Host routes a request.")
	fs.StringSliceVar(&o.ServerHosts, "jwks-server-hosts", o.ServerHosts, "Host names of the JWKS server itself (e.g. its Service's DNS name), for proxies that rewrite Host: a request for one of them is answered by issuer path alone, when exactly one issuer has that path. No JWKSConfig may claim an issuer on them (IssuerNotAllowed). Any other host is answered only with the sets of issuers on that host.")
	fs.DurationVar(&o.ServerReadTimeout, "jwks-server-read-timeout", o.ServerReadTimeout, "Longest time the JWKS server waits for a request, headers included.")
	fs.DurationVar(&o.ServerWriteTimeout, "jwks-server-write-timeout", o.ServerWriteTimeout, "Longest time the JWKS server takes to answer a request.")
	fs.DurationVar(&o.ServerIdleTimeout, "jwks-server-idle-timeout", o.ServerIdleTimeout, "How long the JWKS server keeps an idle keep-alive connection open.")
	fs.IntVar(&o.ServerMaxHeaderBytes, "jwks-server-max-header-bytes", o.ServerMaxHeaderBytes, "Largest request header block the JWKS server reads, in bytes.")
	fs.IntVar(&o.ServerMaxConnections, "jwks-server-max-connections", o.ServerMaxConnections, "Most connections the JWKS server holds open at once; more wait to be accepted. 0: no limit.")
}

// Validate checks every option before anything connects: a mistake stops the process
// with one line naming the flag.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--jwks-workers must be at least 1, not %d", o.Workers)
	}
	for _, d := range []struct {
		flag     string
		value    time.Duration
		positive bool // else zero is allowed (it turns the bound off)
	}{
		{"--jwks-min-update-interval", o.MinUpdateInterval, false},
		{"--jwks-retry-base-delay", o.RetryBaseDelay, true},
		{"--jwks-retry-max-delay", o.RetryMaxDelay, true},
		{"--jwks-max-cache-max-age", o.MaxCacheMaxAge, false},
		{"--jwks-promotion-margin", o.PromotionMargin, false},
		{"--jwks-relying-party-scrape-interval", o.RelyingPartyScrapeInterval, true},
		{"--jwks-server-read-timeout", o.ServerReadTimeout, true},
		{"--jwks-server-write-timeout", o.ServerWriteTimeout, true},
		{"--jwks-server-idle-timeout", o.ServerIdleTimeout, true},
	} {
		if d.value < 0 || d.positive && d.value == 0 {
			return fmt.Errorf("%s must be a positive duration such as 10s, not %v", d.flag, d.value)
		}
	}
	if o.RetryMaxDelay < o.RetryBaseDelay {
		return fmt.Errorf("--jwks-retry-max-delay (%v) must not be shorter than --jwks-retry-base-delay (%v)", o.RetryMaxDelay, o.RetryBaseDelay)
	}
	for _, h := range o.RelyingPartyHosts {
		if err := validRelyingPartyHost(h); err != nil {
			return fmt.Errorf("--jwks-relying-party-hosts: %w", err)
		}
	}
	if o.NginxImage == "" {
		return fmt.Errorf("--jwks-nginx-image must name an image")
	}
	if o.NginxMaxReplicas < 0 {
		return fmt.Errorf("--jwks-nginx-max-replicas must not be negative (0: no limit), not %d", o.NginxMaxReplicas)
	}
	if _, err := o.limits(); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Label(o.IssuerClaimNamespace); len(errs) > 0 {
		return fmt.Errorf("--jwks-issuer-claim-namespace %q is not a namespace name: %s", o.IssuerClaimNamespace, errs[0])
	}
	if _, err := o.issuerClaims(nil); err != nil {
		return err
	}
	if o.serverEnabled() {
		if err := checkAddress(o.ServerBindAddress); err != nil {
			return fmt.Errorf("--jwks-server-bind-address: %w", err)
		}
	}
	if _, err := jwkshttp.ParseTrustedProxies(o.TrustedProxies); err != nil {
		return fmt.Errorf("--jwks-server-trusted-proxies: %w", err)
	}
	if o.ServerMaxHeaderBytes < 1 {
		return fmt.Errorf("--jwks-server-max-header-bytes must be positive, not %d", o.ServerMaxHeaderBytes)
	}
	if o.ServerMaxConnections < 0 {
		return fmt.Errorf("--jwks-server-max-connections must not be negative (0: no limit), not %d", o.ServerMaxConnections)
	}
	return nil
}

// checkAddress says why addr is not a listen address such as :8082 or 127.0.0.1:8082.
func checkAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port, such as :8082 ('0' disables)", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return fmt.Errorf("%q: port %q is not a port number (0 to 65535) or a service name", addr, port)
	}
	return nil
}

// limits parses the options' bounds.
func (o *Options) limits() (Limits, error) {
	l := Limits{MaxCacheMaxAge: o.MaxCacheMaxAge, NginxMaxReplicas: o.NginxMaxReplicas}
	if len(o.NginxMaxResources) > 0 {
		l.NginxMaxResources = corev1.ResourceList{}
		for name, value := range o.NginxMaxResources {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return Limits{}, fmt.Errorf("--jwks-nginx-max-resources %s=%s: not a quantity such as 500m or 512Mi", name, value)
			}
			l.NginxMaxResources[corev1.ResourceName(name)] = q
		}
	}
	return l, nil
}

// issuerClaims are the claims the options describe, read through reader.
func (o *Options) issuerClaims(reader client.Reader) (*issuerclaim.Claims, error) {
	bindings, err := jwkset.ParseIssuerBindings(o.IssuerNamespaces)
	if err != nil {
		return nil, fmt.Errorf("--jwks-issuer-namespaces: %w", err)
	}
	hosts := make([]string, 0, len(o.ServerHosts))
	for _, h := range o.ServerHosts {
		key, err := jwkset.HostKey(h)
		if err != nil {
			return nil, fmt.Errorf("--jwks-server-hosts %q: %w", h, err)
		}
		hosts = append(hosts, key)
	}
	return &issuerclaim.Claims{Namespace: o.IssuerClaimNamespace, Reader: reader, Bindings: bindings, ServerHosts: hosts, Hold: o.MaxCacheMaxAge}, nil
}

// serverEnabled says whether the options run a JWKS server.
func (o *Options) serverEnabled() bool {
	return o.ServerBindAddress != "" && o.ServerBindAddress != "0"
}

// serverLimits are the JWKS server's bounds the options set.
func (o *Options) serverLimits() jwkshttp.ServerLimits {
	return jwkshttp.ServerLimits{ReadTimeout: o.ServerReadTimeout, WriteTimeout: o.ServerWriteTimeout, IdleTimeout: o.ServerIdleTimeout,
		MaxHeaderBytes: o.ServerMaxHeaderBytes, MaxConnections: o.ServerMaxConnections}
}
