package shoot

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trustplane/trustplane/api/duration"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// What a Cluster asks of its Shoot beyond size and place (spec.kubernetesVersion,
// spec.kubeAPIServer, spec.registryCache, spec.infrastructure.networking.dualStack), each
// rendered as kyma-project/infrastructure-manager's converter renders a Runtime's (files
// under its pkg/gardener/shoot/extender/) and checked as Gardener and the extensions
// check it.

const (
	// RegistryCacheExtension is the registry cache extension's type
	// (gardener-extension-registry-cache; KIM extensions/registry_config.go).
	RegistryCacheExtension = "registry-cache"
	// ACLExtension is the API server ACL extension's type (stackitcloud/gardener-extension-acl
	// pkg/controller/add.go; KIM extensions/apiServerACL.go).
	ACLExtension = "acl"
	// maxACLCIDRs is the acl extension's admission limit (its --maxAllowedCIDRs default).
	maxACLCIDRs = 50
	// DefaultNewestKubernetesVersion is the newest minor version Gardener v1.149 provisions
	// (gardener pkg/utils/validation/kubernetesversion/version.go SupportedVersions).
	DefaultNewestKubernetesVersion = "1.36"
	// oldestKubernetesMinor is the oldest one (the same list).
	oldestKubernetesMinor = 32
)

// Gardener's bounds of serviceAccountConfig.maxTokenExpiration (pkg/api/core/validation/
// shoot.go: at least 720h, at most 2160h, or 0); infrastructure-manager clamps into them
// (extender/token/tokenExpiration.go).
const (
	gardenMinTokenExpiration = 720 * time.Hour
	gardenMaxTokenExpiration = 2160 * time.Hour
)

// kubernetesVersionOf is the Shoot's Kubernetes version: the Cluster's own, or the
// operator's; empty lets Gardener choose.
func kubernetesVersionOf(spec operatorv1alpha1.ClusterSpec, p Params) string {
	if spec.KubernetesVersion != "" {
		return spec.KubernetesVersion
	}
	return p.KubernetesVersion
}

var kubernetesVersion = regexp.MustCompile(`^1\.[0-9]{1,3}(\.[0-9]{1,4})?$`)

// versionProblem says what keeps version (path names where it is set) from being one
// the garden provisions: 1.32 up to the landscape's newest; "" when nothing does.
func versionProblem(path, version string, l Landscape) string {
	if !kubernetesVersion.MatchString(version) {
		return fmt.Sprintf("%s %q is not a Kubernetes version such as 1.35 or 1.35.2", path, version)
	}
	newest := l.NewestKubernetesVersion()
	minor, _ := strconv.Atoi(strings.Split(version, ".")[1])
	newestMinor, _ := strconv.Atoi(strings.Split(newest, ".")[1])
	switch {
	case minor < oldestKubernetesMinor:
		return fmt.Sprintf("%s %s: Gardener provisions Kubernetes 1.%d and newer", path, version, oldestKubernetesMinor)
	case minor > newestMinor:
		return fmt.Sprintf("%s %s: the garden's newest is %s (landscape.kubernetes.newestVersion)", path, version, newest)
	}
	return ""
}

// tokenExpirationOf is serviceAccountConfig.maxTokenExpiration of the Shoot, or 0 when
// neither the Cluster nor the landscape sets one: the Cluster's value, else the
// landscape's, clamped to the landscape's bounds (infrastructure-manager clamps its
// configured value to Gardener's the same way).
func tokenExpirationOf(spec operatorv1alpha1.ClusterSpec, p Params) time.Duration {
	t := p.Landscape.ServiceAccountTokens
	var d time.Duration
	if a := spec.KubeAPIServer; a != nil && a.ServiceAccountConfig != nil && a.ServiceAccountConfig.MaxTokenExpiration != nil {
		d, _ = a.ServiceAccountConfig.MaxTokenExpiration.Parse()
	} else if t.MaxExpiration != "" {
		d, _ = duration.Parse(t.MaxExpiration)
	}
	if d == 0 {
		return 0
	}
	lo, hi := t.bounds()
	return min(max(d, lo), hi)
}

// serviceAccountConfigOf is kubeAPIServer.serviceAccountConfig, or nil: as
// infrastructure-manager renders it, tokens are not extended beyond it.
func serviceAccountConfigOf(spec operatorv1alpha1.ClusterSpec, p Params) map[string]any {
	d := tokenExpirationOf(spec, p)
	if d == 0 {
		return nil
	}
	return map[string]any{"maxTokenExpiration": d.String(), "extendTokenExpiration": false}
}

// registryCacheExtension is the registry-cache extension of the Cluster's caches, or nil
// (KIM extensions/registry_config.go; the extension's API
// registry.extensions.gardener.cloud/v1alpha3 RegistryConfig).
func registryCacheExtension(spec operatorv1alpha1.ClusterSpec) map[string]any {
	if len(spec.RegistryCache) == 0 {
		return nil
	}
	caches := make([]any, len(spec.RegistryCache))
	for i, c := range spec.RegistryCache {
		cache := map[string]any{"upstream": c.Upstream, "volume": map[string]any{"size": volumeSizeOf(c)}}
		ttl, _ := c.GarbageCollection.TTL.Parse()
		if c.GarbageCollection.TTL == "" {
			ttl = defaultRegistryCacheTTL
		}
		// As metav1.Duration writes it, which is what the extension decodes.
		cache["garbageCollection"] = map[string]any{"ttl": ttl.String()}
		caches[i] = cache
	}
	return map[string]any{"type": RegistryCacheExtension, "providerConfig": map[string]any{
		"apiVersion": "registry.extensions.gardener.cloud/v1alpha3", "kind": "RegistryConfig", "caches": caches}}
}

// The registry cache extension's defaults (pkg/apis/registry/v1alpha3/defaults.go), which
// the Cluster's CRD defaults to as well.
const (
	defaultRegistryCacheVolumeSize = "10Gi"
	defaultRegistryCacheTTL        = 168 * time.Hour
)

func volumeSizeOf(c operatorv1alpha1.RegistryCache) string {
	if c.VolumeSize == "" {
		return defaultRegistryCacheVolumeSize
	}
	return c.VolumeSize
}

// aclExtension is the acl extension allowing the Cluster's CIDRs and the landscape's
// operators', or nil (KIM extensions/apiServerACL.go: one ALLOW rule of type remote_ip).
func aclExtension(spec operatorv1alpha1.ClusterSpec, p Params) map[string]any {
	cidrs := aclCIDRs(spec, p)
	if cidrs == nil {
		return nil
	}
	return map[string]any{"type": ACLExtension, "providerConfig": map[string]any{
		"rule": map[string]any{"action": "ALLOW", "type": "remote_ip", "cidrs": toAny(cidrs)}}}
}

// aclCIDRs are the CIDRs the API server allows: nil without spec.kubeAPIServer.acl.
func aclCIDRs(spec operatorv1alpha1.ClusterSpec, p Params) []string {
	if spec.KubeAPIServer == nil || spec.KubeAPIServer.ACL == nil {
		return nil
	}
	cidrs := make([]string, 0, len(spec.KubeAPIServer.ACL.AllowedCIDRs)+len(p.Landscape.ACL.OperatorCIDRs))
	for _, c := range spec.KubeAPIServer.ACL.AllowedCIDRs {
		cidrs = append(cidrs, string(c))
	}
	return append(cidrs, p.Landscape.ACL.OperatorCIDRs...)
}

// checkACLCIDR reads a CIDR as the Cluster's CRD admits it (the CEL isCIDR of
// kube-apiserver's library: netip.ParsePrefix, IPv4-mapped IPv6 refused); every such
// CIDR is one the acl extension's net.ParseCIDR reads too.
func checkACLCIDR(s string) error {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Errorf("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32")
	}
	if prefix.Addr().Is4In6() {
		return fmt.Errorf("an IPv4-mapped IPv6 address: write it as IPv4")
	}
	return nil
}

// dualStack says whether the Cluster's Shoot has IPv6 beside IPv4.
func dualStack(spec operatorv1alpha1.ClusterSpec) bool {
	nw := spec.Infrastructure.Networking
	return nw != nil && nw.DualStack
}

// dualStackProviders are the providers infrastructure-manager makes dual-stack Shoots on
// (extender/networking/networking.go).
var dualStackProviders = map[string]bool{"aws": true, "gcp": true}

// aclProviders are the providers infrastructure-manager enables the API server ACL on
// (extender/extensions/apiServerACL.go AclNeedsToBeEnabled).
var aclProviders = map[string]bool{"aws": true, "azure": true}

// registryUpstream is the registry cache extension's <host>[:<port>] (pkg/apis/registry/
// validation/validation.go ValidateUpstream: a DNS subdomain, a port from 1 to 65535).
var registryUpstream = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$`)

// registryVolumeSize is what the Cluster's CRD admits as a cache's volume size.
var registryVolumeSize = regexp.MustCompile(`^[1-9][0-9]{0,5}(Mi|Gi|Ti)$`)

// featureProblems are what Gardener or an extension would refuse in what a Cluster asks
// beyond size and place, for a Cluster admission could not check (stored before its
// rules, or against the landscape's settings).
func featureProblems(spec operatorv1alpha1.ClusterSpec, p Params) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	provider := spec.Infrastructure.Provider
	if spec.KubernetesVersion != "" {
		if problem := versionProblem("spec.kubernetesVersion", spec.KubernetesVersion, p.Landscape); problem != "" {
			add("%s", problem)
		}
	}
	if dualStack(spec) && !dualStackProviders[provider] {
		add("spec.infrastructure.networking.dualStack: IPv4 and IPv6 are provisioned on aws and gcp only, not %q", provider)
	}
	if a := spec.KubeAPIServer; a != nil && a.ACL != nil {
		if !aclProviders[provider] {
			add("spec.kubeAPIServer.acl: the API server's ACL is provisioned on aws and azure only, not %q", provider)
		}
		for i, c := range a.ACL.AllowedCIDRs {
			if err := checkACLCIDR(string(c)); err != nil {
				add("spec.kubeAPIServer.acl.allowedCIDRs[%d] %q: %v", i, c, err)
			}
		}
		if n := len(aclCIDRs(spec, p)); n > maxACLCIDRs {
			add("spec.kubeAPIServer.acl.allowedCIDRs: %d with the landscape's %d operator CIDRs, more than the acl extension's %d", n, len(p.Landscape.ACL.OperatorCIDRs), maxACLCIDRs)
		}
	}
	if a := spec.KubeAPIServer; a != nil && a.ServiceAccountConfig != nil && a.ServiceAccountConfig.MaxTokenExpiration != nil {
		if _, err := a.ServiceAccountConfig.MaxTokenExpiration.Parse(); err != nil {
			add("spec.kubeAPIServer.serviceAccountConfig.maxTokenExpiration: %v", err)
		}
	}
	seen := map[string]bool{}
	for i, c := range spec.RegistryCache {
		path := fmt.Sprintf("spec.registryCache[%d]", i)
		if !registryUpstream.MatchString(c.Upstream) || len(c.Upstream) > 259 {
			add("%s.upstream %q: a registry as <host>[:<port>], e.g. docker.io or registry.example.com:5000", path, c.Upstream)
		}
		if seen[c.Upstream] {
			add("%s.upstream %q: cached twice", path, c.Upstream)
		}
		seen[c.Upstream] = true
		if c.VolumeSize != "" && !registryVolumeSize.MatchString(c.VolumeSize) {
			add("%s.volumeSize %q: a size such as 10Gi", path, c.VolumeSize)
		}
		if c.GarbageCollection.TTL != "" {
			if _, err := c.GarbageCollection.TTL.Parse(); err != nil {
				add("%s.garbageCollection.ttl: %v", path, err)
			}
		}
	}
	return problems
}
