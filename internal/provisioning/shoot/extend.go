package shoot

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// What the landscape (Params.Landscape) adds to a Shoot, each as
// kyma-project/infrastructure-manager's converter adds it (the files named are under its
// pkg/gardener/shoot/), checked against what Gardener and the extensions accept.

// AuditLogTenantMissingError: the landscape makes audit logging mandatory and has no
// tenant for the Cluster's provider and region. Only a change of the landscape (or of the
// Cluster's region) helps; the Cluster operator stalls the Cluster with reason
// AuditLogTenantMissing rather than make a Shoot without audit logging.
type AuditLogTenantMissingError struct {
	Provider, Region string
}

func (e *AuditLogTenantMissingError) Error() string {
	return fmt.Sprintf("audit logging is mandatory (landscape.auditLog.mandatory) and there is no audit-log tenant for provider %q in region %q: add landscape.auditLog.tenants.%s.%s to the configuration",
		e.Provider, e.Region, e.Provider, e.Region)
}

// auditLogTenant is the audit-log tenant of the Cluster's provider and region, as
// extender/auditlogs/auditlogs_configuration.go GetAuditLogData looks it up.
func auditLogTenant(spec operatorv1alpha1.ClusterSpec, p Params) (AuditLogTenant, bool) {
	t, ok := p.Landscape.AuditLog.Tenants[spec.Infrastructure.Provider][spec.Core.Region]
	return t, ok
}

// CheckAuditLog returns an *AuditLogTenantMissingError when the landscape makes audit
// logging mandatory and has no tenant for the Cluster's provider and region, as
// infrastructure-manager's create and patch steps refuse such a Runtime
// (internal/controller/runtime/fsm/runtime_fsm_create_shoot.go).
func CheckAuditLog(spec operatorv1alpha1.ClusterSpec, p Params) error {
	if _, ok := auditLogTenant(spec, p); !ok && p.Landscape.AuditLog.Mandatory {
		return &AuditLogTenantMissingError{Provider: spec.Infrastructure.Provider, Region: spec.Core.Region}
	}
	return nil
}

// EUAccessOnly says whether the Cluster is EU access only: its platform region (label
// kyma-project.io/platform-region) is one the landscape lists, as
// extender/restrictions/restrictions.go decides it from the Runtime's platform region.
func EUAccessOnly(cluster *operatorv1alpha1.Cluster, p Params) bool {
	region := cluster.Labels[operatorv1alpha1.PlatformRegionLabel]
	return region != "" && slices.Contains(p.Landscape.EUAccess.PlatformRegions, region)
}

// landscapeExtensions are the extensions the landscape enables, in the order
// extender/extensions/extender.go adds them: certificates, DNS, audit log.
func landscapeExtensions(spec operatorv1alpha1.ClusterSpec, p Params) []any {
	l := p.Landscape
	var out []any
	if l.CertService {
		// extender/extensions/cert.go: shoot issuers on, so that the shoot's own Issuers work.
		out = append(out, map[string]any{"type": CertExtension, "providerConfig": map[string]any{
			"apiVersion": "service.cert.extensions.gardener.cloud/v1alpha1", "kind": "CertConfig",
			"shootIssuers": map[string]any{"enabled": true}}})
	}
	if l.DNSService || l.DNS.ProviderType != "" {
		// extender/extensions/dns.go. The extension's mutating webhook
		// (gardener-extension-shoot-dns-service pkg/admission/mutator/shoot_mutator.go) fills
		// providers from spec.dns.providers when syncProvidersFromShootSpecDNS is true, with
		// the resource references its validator demands: trustplane leaves them to it.
		config := map[string]any{"apiVersion": "service.dns.extensions.gardener.cloud/v1alpha1", "kind": "DNSConfig",
			"syncProvidersFromShootSpecDNS": true}
		if l.DNS.ProviderType != "" {
			config["dnsProviderReplication"] = map[string]any{"enabled": true}
		}
		out = append(out, map[string]any{"type": DNSExtension, "providerConfig": config})
	}
	if t, ok := auditLogTenant(spec, p); ok {
		// extender/extensions/auditlog.go: the standard service, its credentials by the
		// name of the Shoot's resource reference.
		out = append(out, map[string]any{"type": AuditLogExtension, "providerConfig": map[string]any{
			"apiVersion": "service.auditlog.extensions.gardener.cloud/v1alpha1", "kind": "AuditlogConfig",
			"type": "standard", "tenantID": t.TenantID, "serviceURL": t.ServiceURL,
			"secretReferenceName": AuditLogCredentialsResource}})
	}
	return out
}

// mergeExtensions is the Cluster's extensions with the landscape's: an extension the
// landscape configures replaces the Cluster's entry of its type (the landscape's
// credentials and tenants are the operator's, not a tenant's to change), the others stay
// in the Cluster's order.
func mergeExtensions(cluster, landscape []any) []any {
	out := make([]any, 0, len(cluster)+len(landscape))
	for _, e := range cluster {
		if m, _ := e.(map[string]any); !slices.ContainsFunc(landscape, sameType(m["type"])) {
			out = append(out, e)
		}
	}
	return append(out, landscape...)
}

func sameType(t any) func(any) bool {
	return func(e any) bool { m, _ := e.(map[string]any); return m["type"] == t }
}

// dnsOf is spec.dns of the Shoot named shootName, or nil: the landscape's domain and its
// provider as the primary one (extender/dns.go). The credentials are named with
// credentialsRef: Gardener forbids secretName from Kubernetes 1.35 and fills it in from
// credentialsRef before (gardener pkg/api/core/validation/shoot.go validateDNS,
// pkg/apiserver/registry/core/shoot/strategy.go SyncDNSProviderCredentials).
func dnsOf(shootName string, p Params) map[string]any {
	d := p.Landscape.DNS
	if d.ProviderType == "" {
		return nil
	}
	return map[string]any{
		"domain": shootName + "." + d.Domain,
		"providers": []any{map[string]any{"primary": true, "type": d.ProviderType,
			"credentialsRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": d.SecretName}}},
	}
}

// awsWorkerConfig is the worker providerConfig that makes AWS nodes require IMDSv2
// tokens (extender/provider/provider.go setWorkerConfig, hyperscaler/aws/config.go
// NewWorkerConfig), or nil.
func awsWorkerConfig(provider string, p Params) map[string]any {
	if provider != "aws" || !p.Landscape.AWS.EnableIMDSv2 {
		return nil
	}
	return map[string]any{"apiVersion": ProviderAPIVersion("aws"), "kind": "WorkerConfig",
		"instanceMetadataOptions": map[string]any{"httpTokens": "required", "httpPutResponseHopLimit": int64(2)}}
}

// euAccessRestrictions are the access restrictions of an EU-access Shoot
// (extender/restrictions/restrictions.go).
func euAccessRestrictions() []any {
	return []any{map[string]any{"name": EUAccessRestriction, "options": map[string]any{
		"support.gardener.cloud/eu-access-for-cluster-addons": "true",
		"support.gardener.cloud/eu-access-for-cluster-nodes":  "true"}}}
}

// tolerationsOf are the seed taints the region's Shoots tolerate (extender/tolerations.go
// hard-codes me-central2 → ksa-assured-workload), or nil.
func tolerationsOf(region string, p Params) []any {
	keys := p.Landscape.Tolerations[region]
	if len(keys) == 0 {
		return nil
	}
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = map[string]any{"key": k}
	}
	return out
}

// kimMetadata adds infrastructure-manager's labels and annotations from what the Cluster
// has: the seed's globalaccountid/subaccountid labels (or the Runtime's keys), the runtime
// ID label if there is one, and the generation. Nothing is made up: a Cluster without a
// runtime ID gets no runtime-id annotation.
func kimMetadata(cluster *operatorv1alpha1.Cluster, labels, annotations map[string]any) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := cluster.Labels[k]; v != "" {
				return v
			}
		}
		return ""
	}
	if v := first("globalaccountid", operatorv1alpha1.RuntimeGlobalAccountLabel); v != "" {
		labels[operatorv1alpha1.KIMAccountLabel] = v
	}
	if v := first("subaccountid", operatorv1alpha1.RuntimeSubaccountLabel); v != "" {
		labels[operatorv1alpha1.KIMSubaccountLabel] = v
	}
	if v := cluster.Labels[operatorv1alpha1.RuntimeIDLabel]; v != "" {
		annotations[operatorv1alpha1.KIMRuntimeIDAnnotation] = v
	}
	annotations[operatorv1alpha1.KIMRuntimeGenerationAnnotation] = strconv.FormatInt(cluster.Generation, 10)
}

// KeepLive makes desired keep what the existing Shoot live has where the operator's
// settings changed and Gardener would refuse the change, or where Gardener moved on:
//   - spec.cloudProfile: Gardener refuses another CloudProfile (other than one of the same
//     hierarchy) on an existing Shoot (gardener pkg/utils/gardener/cloudprofile.go
//     ValidateCloudProfileChanges), so a new --shoot-cloud-profiles applies to new Shoots;
//   - spec.dns, once the Shoot has a domain: the domain is immutable and the primary
//     provider cannot go (pkg/api/core/validation/shoot.go validateDNSUpdate), so a new
//     landscape.dns applies to new Shoots;
//   - kubernetes.version and a worker's machine image version are never lowered: Gardener
//     updates them in the maintenance window and refuses a downgrade, and
//     infrastructure-manager keeps the newer one the same way (extender/kubernetes.go,
//     extender/provider/provider.go alignWorkerMachineImageVersion).
func KeepLive(live, desired *unstructured.Unstructured) {
	if live == nil || live.Object["spec"] == nil {
		return
	}
	if cp, found, _ := unstructured.NestedMap(live.Object, "spec", "cloudProfile"); found {
		_ = unstructured.SetNestedMap(desired.Object, cp, "spec", "cloudProfile")
	}
	if domain, _, _ := unstructured.NestedString(live.Object, "spec", "dns", "domain"); domain != "" {
		dns, _, _ := unstructured.NestedMap(live.Object, "spec", "dns")
		_ = unstructured.SetNestedMap(desired.Object, dns, "spec", "dns")
	}
	was, _, _ := unstructured.NestedString(live.Object, "spec", "kubernetes", "version")
	if now, found, _ := unstructured.NestedString(desired.Object, "spec", "kubernetes", "version"); found && newer(was, now) {
		_ = unstructured.SetNestedField(desired.Object, was, "spec", "kubernetes", "version")
	}
	liveImages := map[string]map[string]any{}
	for _, w := range sliceOf(live.Object, "spec", "provider", "workers") {
		image, _, _ := unstructured.NestedMap(w, "machine", "image")
		name, _ := w["name"].(string)
		liveImages[name] = image
	}
	workers := sliceOf(desired.Object, "spec", "provider", "workers")
	for _, w := range workers {
		name, _ := w["name"].(string)
		image, _, _ := unstructured.NestedFieldNoCopy(w, "machine", "image")
		img, _ := image.(map[string]any)
		was := liveImages[name]
		if img == nil || was == nil || img["name"] != was["name"] {
			continue
		}
		if v, _ := was["version"].(string); img["version"] != nil && newer(v, fmt.Sprint(img["version"])) {
			img["version"] = v
		}
	}
}

func sliceOf(obj map[string]any, path ...string) []map[string]any {
	items, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	list, _ := items.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// newer says whether version a is newer than b, both dotted numbers (1.33.2,
// 1592.1.0); false when either is not one.
func newer(a, b string) bool {
	pa, okA := versionParts(a)
	pb, okB := versionParts(b)
	if !okA || !okB {
		return false
	}
	for i := range max(len(pa), len(pb)) {
		x, y := at(pa, i), at(pb, i)
		if x != y {
			return x > y
		}
	}
	return false
}

func versionParts(v string) ([]int, bool) {
	if v == "" {
		return nil, false
	}
	parts := strings.Split(v, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}
