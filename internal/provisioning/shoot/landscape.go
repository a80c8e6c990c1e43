package shoot

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trustplane/trustplane/api/duration"
)

// Landscape is what a real Kyma landscape adds to every Shoot beyond Params' defaults:
// the section `landscape` of ManagerConfiguration, read from the configuration file only
// (no flags: its tables are per provider and region). The zero Landscape adds nothing.
// Each field has a `doc` tag: docs/configuration.md and the chart's values.schema.json
// are generated from them.
//
// Each setting mirrors an option of kyma-project/infrastructure-manager's converter
// (pkg/config/config.go ConverterConfig and the extenders of pkg/gardener/shoot/extender);
// docs/provisioning.md "Coming from infrastructure-manager" maps one to the other.
type Landscape struct {
	AuditLog AuditLog `json:"auditLog,omitempty" doc:"Audit logging of every Shoot: the shoot-auditlog-service extension with the tenant of the Shoot's provider and region, its credentials as a resource reference and the kube-apiserver audit policy (infrastructure-manager's auditLogging and --audit-log-mandatory)."`
	DNS      DNS      `json:"dns,omitempty" doc:"The Shoots' own DNS domain and its provider: spec.dns and the shoot-dns-service extension (infrastructure-manager's dns). Empty: Gardener's default domain."`
	// DNSService and CertService are on in every Shoot infrastructure-manager makes.
	DNSService           bool                 `json:"dnsService,omitempty" doc:"Enable the shoot-dns-service extension (DNS records from the shoot's DNSEntries and annotated Services and Ingresses) in every Shoot, also without dns (then in Gardener's default domain). On by itself when dns is set."`
	CertService          bool                 `json:"certService,omitempty" doc:"Enable the shoot-cert-service extension with shoot issuers in every Shoot (certificates from the shoot's Certificate resources)."`
	Maintenance          LandscapeMaintenance `json:"maintenance,omitempty" doc:"Maintenance windows per region and what Gardener updates in them."`
	ExposureClasses      map[string]string    `json:"exposureClasses,omitempty" doc:"ExposureClass of the Shoots' API server endpoint per provider (aws, azure, gcp, openstack), e.g. openstack: converged-cloud-internet. The ExposureClass must exist in the garden."`
	EUAccess             EUAccess             `json:"euAccess,omitempty" doc:"Which Clusters are EU access only: their Shoots get the eu-access-only access restriction and their credential comes from the EU-access pool."`
	AWS                  AWSLandscape         `json:"aws,omitempty" doc:"Settings only AWS Shoots have."`
	Tolerations          map[string][]string  `json:"tolerations,omitempty" doc:"Seed taints the Shoots of a region tolerate, by region (keys only), e.g. me-central2: [ksa-assured-workload]."`
	DefaultOIDC          *LandscapeOIDC       `json:"defaultOIDC,omitempty" doc:"The OIDC issuer of Clusters without spec.oidcConfig (infrastructure-manager's kubernetes.defaultOperatorOidc), through structured authentication like a Cluster's own. Unset: such Shoots have no OIDC."`
	ACL                  LandscapeACL         `json:"acl,omitempty" doc:"What the landscape adds to the API server ACL of a Cluster that has one (spec.kubeAPIServer.acl)."`
	ServiceAccountTokens ServiceAccountTokens `json:"serviceAccountTokens,omitempty" doc:"The longest a service-account token of a Shoot's API server may live: the default and the bounds a Cluster's spec.kubeAPIServer.serviceAccountConfig.maxTokenExpiration is clamped to (infrastructure-manager's kubernetes.kubeApiServer.maxTokenExpiration)."`
	Kubernetes           LandscapeKubernetes  `json:"kubernetes,omitempty" doc:"The Kubernetes versions the garden provisions."`
	// InfrastructureManagerMetadata renders the labels and annotations infrastructure-manager
	// puts on its Shoots, for the tools around it that read them.
	InfrastructureManagerMetadata bool `json:"infrastructureManagerMetadata,omitempty" doc:"Label and annotate the Shoots as infrastructure-manager does, for the tools that read them: labels account and subaccount (from the Cluster's globalaccountid/subaccountid labels, or kyma-project.io/global-account-id and kyma-project.io/subaccount-id), annotations infrastructuremanager.kyma-project.io/runtime-id (from the Cluster's kyma-project.io/runtime-id label, when it has one) and infrastructuremanager.kyma-project.io/runtime-generation (the Cluster's generation)."`
}

// AuditLog is infrastructure-manager's auditLogging configuration with the tenant file
// inline (pkg/gardener/shoot/extender/auditlogs/auditlogs_configuration.go).
type AuditLog struct {
	Mandatory           bool                                 `json:"mandatory,omitempty" doc:"A Cluster whose provider and region have no tenant is Stalled (reason AuditLogTenantMissing, naming both) instead of getting a Shoot without audit logging. infrastructure-manager's --audit-log-mandatory, which is true there by default; here a landscape turns it on."`
	PolicyConfigMapName string                               `json:"policyConfigMapName,omitempty" doc:"ConfigMap in the garden project namespace holding the kube-apiserver audit policy (key policy), named by every Shoot with audit logging; the operator of the landscape creates it. Required with tenants."`
	Tenants             map[string]map[string]AuditLogTenant `json:"tenants,omitempty" doc:"The audit-log tenant per provider (aws, azure, gcp, openstack) and region (the Shoot's region), e.g. aws: {eu-central-1: {...}}."`
}

// AuditLogTenant is infrastructure-manager's AuditLogData.
type AuditLogTenant struct {
	TenantID   string `json:"tenantID" doc:"The audit-log service tenant the region's Shoots log to."`
	ServiceURL string `json:"serviceURL" doc:"The audit-log service's https URL."`
	SecretName string `json:"secretName" doc:"Secret in the garden project namespace with the audit-log service credentials; the Shoot references it as resource auditlog-credentials."`
}

// DNS is infrastructure-manager's DNSConfig; Domain is its domainPrefix.
type DNS struct {
	ProviderType string `json:"providerType,omitempty" doc:"Type of the DNS provider of the Shoots' domain (a shoot-dns-service provider type: aws-route53, azure-dns, google-clouddns, openstack-designate, ...)."`
	SecretName   string `json:"secretName,omitempty" doc:"Secret in the garden project namespace with the DNS provider's credentials."`
	Domain       string `json:"domain,omitempty" doc:"Parent domain of the Shoots' domains: a Shoot's is <shoot name>.<domain> (infrastructure-manager's domainPrefix)."`
}

// LandscapeMaintenance is infrastructure-manager's maintenance configuration: its region
// map (fsm/maintenanceWindow.go, extender/maintenance) and its auto-update switches
// (kubernetes.enableKubernetesVersionAutoUpdate and enableMachineImageVersionAutoUpdate).
type LandscapeMaintenance struct {
	Windows    map[string]MaintenanceWindow `json:"windows,omitempty" doc:"Maintenance window per region of Shoots with purpose production (HHMMSS+ZZZZ, 30 minutes to 6 hours). Other Shoots, and production Shoots of regions not listed, keep shoot.maintenanceBegin/End."`
	AutoUpdate AutoUpdate                   `json:"autoUpdate,omitempty" doc:"What Gardener updates in the maintenance window."`
}

// MaintenanceWindow is one region's window.
type MaintenanceWindow struct {
	Begin string `json:"begin" doc:"Begin of the window, HHMMSS+ZZZZ."`
	End   string `json:"end" doc:"End of the window, HHMMSS+ZZZZ."`
}

// AutoUpdate says what Gardener updates in the maintenance window; unset means true.
type AutoUpdate struct {
	KubernetesVersion   *bool `json:"kubernetesVersion,omitempty" doc:"Update the Kubernetes patch version; unset: true."`
	MachineImageVersion *bool `json:"machineImageVersion,omitempty" doc:"Update the worker machine image version; unset: true (infrastructure-manager's landscapes set false)."`
}

// EUAccess lists the platform regions whose Clusters are EU access only.
type EUAccess struct {
	PlatformRegions []string `json:"platformRegions,omitempty" doc:"Platform regions (the Cluster's kyma-project.io/platform-region label, as kyma-environment-broker sets it) whose Clusters are EU access only, e.g. [cf-eu11, cf-ch20] (infrastructure-manager's list)."`
}

// AWSLandscape are infrastructure-manager's provider.aws settings.
type AWSLandscape struct {
	EnableIMDSv2 bool `json:"enableIMDSv2,omitempty" doc:"Workers require instance metadata tokens (IMDSv2: httpTokens required, hop limit 2), as infrastructure-manager's provider.aws.enableIMDSv2."`
}

// LandscapeACL is infrastructure-manager's API server ACL configuration: the addresses of
// the landscape's own operators (its acl-list.json and kcp-external-nat-ip.json).
type LandscapeACL struct {
	OperatorCIDRs []string `json:"operatorCIDRs,omitempty" doc:"CIDRs every ACL allows besides the Cluster's own, so that the landscape's operators and control plane keep reaching the API servers, e.g. [198.51.100.7/32]."`
}

// ServiceAccountTokens bounds serviceAccountConfig.maxTokenExpiration.
type ServiceAccountTokens struct {
	MaxExpiration    string `json:"maxExpiration,omitempty" doc:"maxTokenExpiration of Shoots whose Cluster sets none, e.g. 720h. Empty: none is rendered (Gardener's default)."`
	MaxExpirationMin string `json:"maxExpirationMin,omitempty" doc:"The shortest maxTokenExpiration a Shoot gets: a shorter one is raised to it. Empty: 720h, Gardener's lowest."`
	MaxExpirationMax string `json:"maxExpirationMax,omitempty" doc:"The longest maxTokenExpiration a Shoot gets: a longer one is lowered to it. Empty: 2160h, Gardener's highest."`
}

// bounds are the lowest and highest maxTokenExpiration, Gardener's where unset.
func (t ServiceAccountTokens) bounds() (lo, hi time.Duration) {
	lo, hi = gardenMinTokenExpiration, gardenMaxTokenExpiration
	if d, err := duration.Parse(t.MaxExpirationMin); err == nil {
		lo = d
	}
	if d, err := duration.Parse(t.MaxExpirationMax); err == nil {
		hi = d
	}
	return lo, hi
}

// LandscapeKubernetes are the Kubernetes versions of the garden.
type LandscapeKubernetes struct {
	NewestVersion string `json:"newestVersion,omitempty" doc:"The newest Kubernetes minor version the garden provisions, e.g. 1.36: a Cluster's spec.kubernetesVersion and --shoot-kubernetes-version may not be newer. Empty: 1.36 (Gardener v1.149)."`
}

// NewestKubernetesVersion is the landscape's newest version, or Gardener v1.149's.
func (l Landscape) NewestKubernetesVersion() string {
	if l.Kubernetes.NewestVersion != "" {
		return l.Kubernetes.NewestVersion
	}
	return DefaultNewestKubernetesVersion
}

// LandscapeOIDC is an OIDC issuer, as a Cluster's spec.oidcConfig has it.
type LandscapeOIDC struct {
	ClientID       string   `json:"clientID" doc:"Client ID: the audience of the tokens."`
	IssuerURL      string   `json:"issuerURL" doc:"The issuer's https URL."`
	GroupsClaim    string   `json:"groupsClaim,omitempty" doc:"Claim with the user's groups; empty: none."`
	UsernameClaim  string   `json:"usernameClaim,omitempty" doc:"Claim with the user name; empty: sub."`
	UsernamePrefix string   `json:"usernamePrefix,omitempty" doc:"Prefix of user names; - for none; empty: none for email, <issuer># otherwise."`
	SigningAlgs    []string `json:"signingAlgs,omitempty" doc:"Signing algorithms (checked only: kube-apiserver accepts what it accepts)."`
}

// The names infrastructure-manager and Gardener give the things a landscape adds.
const (
	// AuditLogExtension is the audit-log extension's type (KIM extensions/auditlog.go).
	AuditLogExtension = "shoot-auditlog-service"
	// AuditLogCredentialsResource names the Shoot's resource reference to the audit-log
	// credentials, which the extension's providerConfig refers to (KIM auditlogs/set_secret.go).
	AuditLogCredentialsResource = "auditlog-credentials"
	// DNSExtension and CertExtension are the DNS and certificate extensions' types (KIM
	// extensions/dns.go, extensions/cert.go).
	DNSExtension  = "shoot-dns-service"
	CertExtension = "shoot-cert-service"
	// EUAccessRestriction is the access restriction of EU-access Shoots (KIM
	// restrictions/restrictions.go, gardener docs/usage/shoot/access_restrictions.md).
	EUAccessRestriction = "eu-access-only"
)

// dnsProviderTypes are the provider types gardener-extension-shoot-dns-service accepts
// (pkg/apis/service/validation/validation.go supportedProviderTypes).
var dnsProviderTypes = []string{"alicloud-dns", "aws-route53", "azure-dns", "azure-private-dns", "cloudflare-dns", "gdch-dns",
	"google-clouddns", "infoblox-dns", "netlify-dns", "openstack-designate", "powerdns", "remote", "rfc2136"}

// Validate says what is wrong with the landscape, in one line naming each field.
func (l *Landscape) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	subdomain := func(path, v string) {
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			add("%s %q: %s", path, v, msgs[0])
		}
	}
	knownProvider := func(path, provider string) bool {
		if providerTypes[provider] == "" {
			add("%s: %q is not one of aws, azure, gcp, openstack", path, provider)
			return false
		}
		return true
	}

	a := l.AuditLog
	for _, provider := range sortedKeys(a.Tenants) {
		if !knownProvider("auditLog.tenants", provider) {
			continue
		}
		for _, region := range sortedKeys(a.Tenants[provider]) {
			t, path := a.Tenants[provider][region], "auditLog.tenants."+provider+"."+region
			if region == "" {
				add("auditLog.tenants.%s: a region must not be empty", provider)
			}
			if t.TenantID == "" {
				add("%s.tenantID is required", path)
			}
			if u, err := url.Parse(t.ServiceURL); err != nil || u.Scheme != "https" || u.Host == "" {
				add("%s.serviceURL %q must be an https URL", path, t.ServiceURL)
			}
			if t.SecretName == "" {
				add("%s.secretName is required", path)
			} else {
				subdomain(path+".secretName", t.SecretName)
			}
		}
	}
	switch {
	case len(a.Tenants) > 0 && a.PolicyConfigMapName == "":
		add("auditLog.policyConfigMapName is required with auditLog.tenants")
	case a.PolicyConfigMapName != "":
		subdomain("auditLog.policyConfigMapName", a.PolicyConfigMapName)
	}
	if a.Mandatory && len(a.Tenants) == 0 {
		add("auditLog.mandatory needs auditLog.tenants: without any, every Cluster would stall")
	}

	d := l.DNS
	if (d.ProviderType == "") != (d.SecretName == "") || (d.ProviderType == "") != (d.Domain == "") {
		add("dns.providerType, dns.secretName and dns.domain go together")
	}
	if d.ProviderType != "" && !slices.Contains(dnsProviderTypes, d.ProviderType) {
		add("dns.providerType %q is not one of %s", d.ProviderType, strings.Join(dnsProviderTypes, ", "))
	}
	if d.SecretName != "" {
		subdomain("dns.secretName", d.SecretName)
	}
	if d.Domain != "" {
		// A Shoot's domain is <shoot name (NameLength characters)>.<domain>.
		subdomain("dns.domain", strings.Repeat("a", NameLength)+"."+d.Domain)
	}

	for _, region := range sortedKeys(l.Maintenance.Windows) {
		w := l.Maintenance.Windows[region]
		if err := validWindow(w.Begin, w.End); err != nil {
			add("maintenance.windows.%s: %v", region, err)
		}
	}
	for _, provider := range sortedKeys(l.ExposureClasses) {
		if knownProvider("exposureClasses", provider) {
			subdomain("exposureClasses."+provider, l.ExposureClasses[provider])
		}
	}
	for i, r := range l.EUAccess.PlatformRegions {
		if msgs := validation.IsValidLabelValue(r); r == "" || len(msgs) > 0 {
			add("euAccess.platformRegions[%d] %q is not a label value", i, r)
		}
	}
	for _, region := range sortedKeys(l.Tolerations) {
		seen := map[string]bool{}
		for _, key := range l.Tolerations[region] {
			if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
				add("tolerations.%s: %q is not a taint key: %s", region, key, msgs[0])
			}
			if seen[key] {
				add("tolerations.%s: %q twice", region, key)
			}
			seen[key] = true
		}
	}
	for i, c := range l.ACL.OperatorCIDRs {
		if err := checkACLCIDR(c); err != nil {
			add("acl.operatorCIDRs[%d] %q: %v", i, c, err)
		}
	}
	if n := len(l.ACL.OperatorCIDRs); n >= maxACLCIDRs {
		add("acl.operatorCIDRs: %d leave no room for a Cluster's own within the acl extension's %d", n, maxACLCIDRs)
	}
	problems = append(problems, l.ServiceAccountTokens.problems()...)
	if v := l.Kubernetes.NewestVersion; v != "" && !minorVersion.MatchString(v) {
		add("kubernetes.newestVersion %q is not a minor version such as 1.36", v)
	} else if v != "" {
		if minor, _ := strconv.Atoi(strings.TrimPrefix(v, "1.")); minor < oldestKubernetesMinor {
			add("kubernetes.newestVersion %s: Gardener provisions Kubernetes 1.%d and newer", v, oldestKubernetesMinor)
		}
	}
	if o := l.DefaultOIDC; o != nil {
		for _, p := range oidcProblems(o.config()) {
			add("defaultOIDC: %s", strings.TrimPrefix(p, "spec.oidcConfig."))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// minorVersion is a Kubernetes minor version, 1.36.
var minorVersion = regexp.MustCompile(`^1\.[0-9]{1,3}$`)

// problems are what is wrong with the bounds: each a duration, within Gardener's, the
// default within them.
func (t ServiceAccountTokens) problems() []string {
	var problems []string
	parsed := map[string]time.Duration{}
	for _, f := range []struct{ name, value string }{{"maxExpiration", t.MaxExpiration}, {"maxExpirationMin", t.MaxExpirationMin}, {"maxExpirationMax", t.MaxExpirationMax}} {
		if f.value == "" {
			continue
		}
		d, err := duration.Parse(f.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("serviceAccountTokens.%s: %v", f.name, err))
		case d < gardenMinTokenExpiration || d > gardenMaxTokenExpiration:
			problems = append(problems, fmt.Sprintf("serviceAccountTokens.%s %s: Gardener takes 720h to 2160h", f.name, f.value))
		default:
			parsed[f.name] = d
		}
	}
	lo, hi := t.bounds()
	if lo > hi {
		problems = append(problems, fmt.Sprintf("serviceAccountTokens: maxExpirationMin %v exceeds maxExpirationMax %v", lo, hi))
	}
	if d, ok := parsed["maxExpiration"]; ok && (d < lo || d > hi) {
		problems = append(problems, fmt.Sprintf("serviceAccountTokens.maxExpiration %s is outside %v to %v", t.MaxExpiration, lo, hi))
	}
	return problems
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
