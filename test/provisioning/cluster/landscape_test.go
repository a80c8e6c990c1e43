package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// landscapeParams are the test garden's settings with a landscape like the one
// docs/provisioning.md shows (internal/provisioning/shoot/testdata/landscape.yaml), naming this
// garden's objects: every option on.
func landscapeParams() shoot.Params {
	p := testParams()
	tenant := func(id string) shoot.AuditLogTenant {
		return shoot.AuditLogTenant{TenantID: id, ServiceURL: "https://auditlog.example:8081", SecretName: auditLogSecret}
	}
	p.Landscape = shoot.Landscape{
		AuditLog: shoot.AuditLog{Mandatory: true, PolicyConfigMapName: auditPolicyConfigMap, Tenants: map[string]map[string]shoot.AuditLogTenant{
			"aws": {"eu-central-1": tenant("t-aws")}, "azure": {"westeurope": tenant("t-az"), "switzerlandnorth": tenant("t-ch")},
			"gcp": {"europe-west3": tenant("t-gcp")}, "openstack": {"eu-de-1": tenant("t-os")}}},
		DNS:         shoot.DNS{ProviderType: "aws-route53", SecretName: dnsSecret, Domain: "kyma.example.com"},
		CertService: true,
		Maintenance: shoot.LandscapeMaintenance{Windows: map[string]shoot.MaintenanceWindow{"eu-central-1": {Begin: "000000+0000", End: "040000+0000"}},
			AutoUpdate: shoot.AutoUpdate{KubernetesVersion: ptr.To(true), MachineImageVersion: ptr.To(false)}},
		ExposureClasses:               map[string]string{"openstack": "converged-cloud-internet"},
		EUAccess:                      shoot.EUAccess{PlatformRegions: []string{"cf-eu11", "cf-ch20"}},
		AWS:                           shoot.AWSLandscape{EnableIMDSv2: true},
		Tolerations:                   map[string][]string{"europe-west3": {"ksa-assured-workload"}},
		InfrastructureManagerMetadata: true,
		ACL:                           shoot.LandscapeACL{OperatorCIDRs: []string{"198.51.100.7/32"}},
		ServiceAccountTokens:          shoot.ServiceAccountTokens{MaxExpiration: "720h"},
		Kubernetes:                    shoot.LandscapeKubernetes{NewestVersion: "1.36"},
	}
	return p
}

// landscapeRegions: aws and azure in the regions of Kyma's EU-access platform regions.
var landscapeRegions = map[string]struct{ region, platformRegion string }{
	"aws": {"eu-central-1", "cf-eu11"}, "azure": {"switzerlandnorth", "cf-ch20"}, "gcp": {"europe-west3", ""}, "openstack": {"eu-de-1", ""},
}

// landscapeShoot is the Shoot the Cluster operator writes with landscapeParams for a
// production Cluster with three zones (EU access only on aws and azure) on provider.
func landscapeShoot(t *testing.T, provider, name string) *unstructured.Unstructured {
	t.Helper()
	return landscapeShootOf(t, landscapeCluster(provider, name))
}

// landscapeShootOf is the Shoot the Cluster operator writes for c with landscapeParams,
// named as c.
func landscapeShootOf(t *testing.T, c *operatorv1alpha1.Cluster) *unstructured.Unstructured {
	t.Helper()
	s, err := shoot.Desired(c, landscapeParams(), "binding-"+c.Spec.Infrastructure.Provider)
	if err != nil {
		t.Fatal(err)
	}
	s.SetName(c.Name)
	return s
}

// landscapeCluster is the production Cluster with three zones (EU access only on aws and
// azure) of landscapeShoot.
func landscapeCluster(provider, name string) *operatorv1alpha1.Cluster {
	where := landscapeRegions[provider]
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "schema", Name: name, Generation: 2,
		Labels: map[string]string{"globalaccountid": "ga-1", "subaccountid": "sa-1"}},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Purpose: "production", Region: where.region},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: provider, MachineType: "m", AutoScalerMin: 3, AutoScalerMax: 5, NumberOfZones: 3}}}
	if where.platformRegion != "" {
		c.Labels[operatorv1alpha1.PlatformRegionLabel] = where.platformRegion
	}
	return c
}

// frontClient writes to the garden through the front, where the admission plugins and
// webhooks that look other objects up are played.
func frontClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(gardenFront.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setSpec sets spec.<path> of a Shoot to value.
func setSpec(value any, path ...string) func(*unstructured.Unstructured) {
	return func(s *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(s.Object, value, append([]string{"spec"}, path...)...)
	}
}

// onExtension changes the Shoot's extension of type typ.
func onExtension(typ string, change func(map[string]any)) func(*unstructured.Unstructured) {
	return func(s *unstructured.Unstructured) {
		list, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
		for _, e := range list {
			if m := e.(map[string]any); m["type"] == typ {
				change(m)
			}
		}
		_ = unstructured.SetNestedSlice(s.Object, list, "spec", "extensions")
	}
}

// onWorker changes the Shoot's i-th worker pool.
func onWorker(i int, change func(map[string]any)) func(*unstructured.Unstructured) {
	return func(s *unstructured.Unstructured) {
		workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
		change(workers[i].(map[string]any))
		_ = unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers")
	}
}

// TestLandscapeShootsAreAccepted: with every landscape option on, the Shoot of each
// provider passes the test garden's schema and CEL rules and its admission plugins and
// webhooks (through the front), and carries what the landscape adds.
func TestLandscapeShootsAreAccepted(t *testing.T) {
	front := frontClient(t)
	for _, provider := range []string{"aws", "azure", "gcp", "openstack"} {
		s := landscapeShoot(t, provider, "landscape-"+provider)
		for _, path := range []string{"dns.domain", "resources", "kubernetes.kubeAPIServer.auditConfig", "maintenance.timeWindow"} {
			if v, found, _ := unstructured.NestedFieldNoCopy(s.Object, append([]string{"spec"}, strings.Split(path, ".")...)...); !found || v == nil {
				t.Errorf("%s: spec.%s is not set: the test proves less than it says", provider, path)
			}
		}
		if err := front.Create(ctx, s, client.DryRunAll); err != nil {
			t.Errorf("%s: the shoot with the landscape is refused: %v", provider, err)
		}
	}
}

// TestLandscapeRulesRefuseCounterExamples: each Gardener rule for what the landscape adds
// refuses a landscape Shoot changed to break it (the schema and CEL rules of the test
// garden, asked directly).
func TestLandscapeRulesRefuseCounterExamples(t *testing.T) {
	provider := func(p map[string]any) []any { return []any{p} }
	secretRef := map[string]any{"apiVersion": "v1", "kind": "Secret", "name": dnsSecret}
	for _, tc := range []struct {
		name, provider string
		change         func(*unstructured.Unstructured)
		want           string // "": accepted
	}{
		// spec.dns: pkg/api/core/validation/shoot.go validateDNS.
		{"dns domain a subdomain", "aws", setSpec("Not_A_Domain", "dns", "domain"), "spec.dns.domain"},
		{"dns domain for a primary provider", "aws", setSpec(map[string]any{"providers": provider(map[string]any{"primary": true, "type": "aws-route53", "credentialsRef": secretRef})}, "dns"), "domain must be set when primary provider type"},
		{"dns unmanaged needs no domain", "aws", setSpec(map[string]any{"providers": provider(map[string]any{"primary": true, "type": "unmanaged"})}, "dns"), ""},
		{"dns one primary provider", "aws", setSpec([]any{map[string]any{"primary": true, "type": "aws-route53", "credentialsRef": secretRef},
			map[string]any{"primary": true, "type": "azure-dns", "credentialsRef": secretRef}}, "dns", "providers"), "multiple primary DNS providers are not supported"},
		{"dns credentialsRef needs a type", "aws", setSpec(provider(map[string]any{"primary": true, "credentialsRef": secretRef}), "dns", "providers"), "type must be set when credentialsRef is set"},
		{"dns non-primary needs credentials", "aws", setSpec(provider(map[string]any{"type": "aws-route53"}), "dns", "providers"), "non-primary DNS providers must specify `credentialsRef`"},
		{"dns credentials a Secret or WorkloadIdentity", "aws", setSpec(provider(map[string]any{"primary": true, "type": "aws-route53",
			"credentialsRef": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}), "dns", "providers"), "credentialsRef: supported values"},
		{"dns secretName forbidden from 1.35", "aws", func(s *unstructured.Unstructured) {
			setSpec("1.35.1", "kubernetes", "version")(s)
			setSpec(provider(map[string]any{"primary": true, "type": "aws-route53", "secretName": dnsSecret, "credentialsRef": secretRef}), "dns", "providers")(s)
		}, "secretName field is no longer supported"},
		{"dns secretName the same Secret before 1.35", "aws", func(s *unstructured.Unstructured) {
			setSpec("1.34.2", "kubernetes", "version")(s)
			setSpec(provider(map[string]any{"primary": true, "type": "aws-route53", "secretName": "other", "credentialsRef": secretRef}), "dns", "providers")(s)
		}, "must refer to the same secret as credentialsRef"},
		{"dns secretName allowed before 1.35", "aws", func(s *unstructured.Unstructured) {
			setSpec("1.34.2", "kubernetes", "version")(s)
			setSpec(provider(map[string]any{"primary": true, "type": "aws-route53", "secretName": dnsSecret, "credentialsRef": secretRef}), "dns", "providers")(s)
		}, ""},
		// spec.resources: pkg/api/core/validation/utils.go ValidateResources.
		{"resources unique", "aws", setSpec([]any{map[string]any{"name": "a", "resourceRef": secretRef}, map[string]any{"name": "a", "resourceRef": secretRef}}, "resources"), "Duplicate value"},
		{"resources of supported kinds", "aws", setSpec([]any{map[string]any{"name": "auditlog-credentials", "resourceRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}}}, "resources"), "resourceRef: supported values"},
		{"resources name a resource", "aws", setSpec([]any{map[string]any{"name": "auditlog-credentials", "resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret"}}}, "resources"), "resourceRef.name: Required value"},
		// Extensions: core validateExtensions, the DNS, certificate and audit-log extensions.
		{"extension type a DNS label", "aws", onExtension("shoot-cert-service", func(e map[string]any) { e["type"] = "Shoot_Cert" }), "spec.extensions[0].type: Invalid value: \"Shoot_Cert\""},
		{"dns extension a DNSConfig", "aws", onExtension("shoot-dns-service", func(e map[string]any) { e["providerConfig"].(map[string]any)["kind"] = "DNSConfiguration" }), "must be a DNSConfig"},
		{"dns extension provider types", "aws", onExtension("shoot-dns-service", func(e map[string]any) {
			e["providerConfig"].(map[string]any)["providers"] = []any{map[string]any{"type": "route53", "secretName": "auditlog-credentials"}}
		}), "have a supported type"},
		{"dns extension secretName or credentials", "aws", onExtension("shoot-dns-service", func(e map[string]any) {
			e["providerConfig"].(map[string]any)["providers"] = []any{map[string]any{"type": "aws-route53", "secretName": "auditlog-credentials", "credentials": "auditlog-credentials"}}
		}), "either secretName or credentials"},
		{"dns extension credentials are spec.resources", "aws", onExtension("shoot-dns-service", func(e map[string]any) {
			e["providerConfig"].(map[string]any)["providers"] = []any{map[string]any{"type": "aws-route53", "secretName": dnsSecret}}
		}), "is not defined as named resource references at 'spec.resources'"},
		{"cert extension a CertConfig", "aws", onExtension("shoot-cert-service", func(e map[string]any) {
			e["providerConfig"].(map[string]any)["apiVersion"] = "cert.gardener.cloud/v1alpha1"
		}), "must be a CertConfig"},
		{"audit-log extension complete", "aws", onExtension("shoot-auditlog-service", func(e map[string]any) { delete(e["providerConfig"].(map[string]any), "tenantID") }), "with tenantID, serviceURL and secretReferenceName"},
		{"audit-log credentials are spec.resources", "aws", onExtension("shoot-auditlog-service", func(e map[string]any) {
			e["providerConfig"].(map[string]any)["secretReferenceName"] = "other"
		}), "secretReferenceName must name an entry of spec.resources"},
		// The audit policy reference: core validateKubernetes.
		{"audit policy ConfigMap named", "aws", setSpec(map[string]any{}, "kubernetes", "kubeAPIServer", "auditConfig", "auditPolicy", "configMapRef"), "configMapRef.name: Required value"},
		// Exposure class, access restrictions, tolerations: core ValidateShootSpec.
		{"exposure class a subdomain", "openstack", setSpec("Converged Cloud", "exposureClassName"), "spec.exposureClassName"},
		{"access restriction named", "aws", setSpec([]any{map[string]any{"options": map[string]any{"a": "b"}}}, "accessRestrictions"), "accessRestrictions[0].name: Required value"},
		{"toleration keys unique", "gcp", setSpec([]any{map[string]any{"key": "a"}, map[string]any{"key": "a", "value": "b"}}, "tolerations"), "tolerations: Duplicate value"},
		{"toleration key a label name", "gcp", setSpec([]any{map[string]any{"key": "not a key"}}, "tolerations"), "spec.tolerations[0].key"},
		// IMDSv2: gardener-extension-provider-aws worker validation.
		{"aws worker config a WorkerConfig", "aws", onWorker(0, func(w map[string]any) { w["providerConfig"].(map[string]any)["kind"] = "WorkerCfg" }), "must be a WorkerConfig"},
		{"aws metadata tokens", "aws", onWorker(0, func(w map[string]any) {
			w["providerConfig"].(map[string]any)["instanceMetadataOptions"].(map[string]any)["httpTokens"] = "mandatory"
		}), `Unsupported value: "mandatory"`},
		{"aws metadata hop limit", "aws", onWorker(0, func(w map[string]any) {
			w["providerConfig"].(map[string]any)["instanceMetadataOptions"].(map[string]any)["httpPutResponseHopLimit"] = int64(65)
		}), "httpPutResponseHopLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := landscapeShoot(t, tc.provider, "landscape-rule")
			tc.change(s)
			checkAnswer(t, mgmt.Client.Create(ctx, s, client.DryRunAll), tc.want)
		})
	}
}

// TestLandscapeUpdateRules: on an existing Shoot Gardener refuses another cloud profile,
// another DNS domain and removing spec.dns; another exposure class is accepted.
func TestLandscapeUpdateRules(t *testing.T) {
	base := landscapeShoot(t, "openstack", "landscape-update")
	if err := mgmt.Client.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, base) })
	for _, tc := range []struct {
		name   string
		change func(*unstructured.Unstructured)
		want   string
	}{
		{"cloud profile", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "converged-cloud-cp", "spec", "cloudProfile", "name")
		}, "must remain within the same hierarchy"},
		{"dns domain", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "other.kyma.example.com", "spec", "dns", "domain")
		}, "dns.domain: field is immutable"},
		{"dns removed", func(s *unstructured.Unstructured) { unstructured.RemoveNestedField(s.Object, "spec", "dns") }, "dns: field is immutable once set"},
		{"exposure class", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "converged-cloud-intranet", "spec", "exposureClassName")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkUpdate(t, base.GetName(), tc.change, tc.want) })
	}
}

// TestGardenAdmissionRefuses: what Gardener's admission plugins and webhooks refuse by
// looking other objects up is refused by the front, with their status codes: an extension
// type or DNS provider type no ControllerRegistration registers, a CloudProfile,
// ExposureClass, resource or DNS Secret that does not exist, an access restriction the
// region does not offer (403), and an audit policy ConfigMap that is missing or holds no
// policy (422).
func TestGardenAdmissionRefuses(t *testing.T) {
	front := frontClient(t)
	set := func(value any, path ...string) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, value, append([]string{"spec"}, path...)...)
		}
	}
	emptyPolicy := "audit-policy-empty"
	if err := mgmt.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": projectNamespace, "name": emptyPolicy}, "data": map[string]any{"other": "x"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, provider string
		change         func(*unstructured.Unstructured)
		code           int
		want           string
	}{
		{"unregistered extension", "gcp", set([]any{map[string]any{"type": "shoot-unknown-service"}}, "extensions"), http.StatusForbidden, `non-registered extension type: spec.extensions[0].type ("shoot-unknown-service")`},
		{"unregistered DNS provider type", "gcp", func(s *unstructured.Unstructured) {
			providers, _, _ := unstructured.NestedSlice(s.Object, "spec", "dns", "providers")
			providers[0].(map[string]any)["type"] = "cloudflare-dns"
			_ = unstructured.SetNestedSlice(s.Object, providers, "spec", "dns", "providers")
		}, http.StatusForbidden, `non-registered extension type: spec.dns.providers[0].type ("cloudflare-dns")`},
		{"missing cloud profile", "openstack", set("converged-cloud-cp", "cloudProfile", "name"), http.StatusForbidden, `cloudprofiles.core.gardener.cloud "converged-cloud-cp" not found`},
		{"missing exposure class", "openstack", set("converged-cloud-intranet", "exposureClassName"), http.StatusForbidden, `exposureclasses.core.gardener.cloud "converged-cloud-intranet" not found`},
		{"missing audit-log Secret", "gcp", set([]any{map[string]any{"name": "auditlog-credentials", "resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "nowhere"}}}, "resources"),
			http.StatusForbidden, `failed to resolve resource reference "auditlog-credentials"`},
		{"missing DNS Secret", "gcp", set([]any{map[string]any{"primary": true, "type": "aws-route53", "credentialsRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "nowhere"}}}, "dns", "providers"),
			http.StatusForbidden, "failed to resolve credentials reference of type Secret"},
		{"access restriction the region does not offer", "gcp", set([]any{map[string]any{"name": "eu-access-only"}}, "accessRestrictions"), http.StatusForbidden, `spec.accessRestrictions[0]: Unsupported value: "eu-access-only"`},
		{"missing audit policy", "gcp", set("nowhere", "kubernetes", "kubeAPIServer", "auditConfig", "auditPolicy", "configMapRef", "name"), http.StatusUnprocessableEntity, "referenced audit policy ConfigMap"},
		{"audit policy ConfigMap without a policy", "gcp", set(emptyPolicy, "kubernetes", "kubeAPIServer", "auditConfig", "auditPolicy", "configMapRef", "name"), http.StatusUnprocessableEntity, "missing audit policy key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := landscapeShoot(t, tc.provider, "landscape-admission")
			tc.change(s)
			err := front.Create(ctx, s, client.DryRunAll)
			var status apierrors.APIStatus
			if !errors.As(err, &status) || int(status.Status().Code) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want %d naming %q", err, tc.code, tc.want)
			}
		})
	}
}

// TestLandscapeReachesTheShoot: with the landscape on, a Cluster of an EU-access platform
// region takes its credential from the EU-access pool and gets a Shoot with every
// landscape option, which the garden accepts; a Cluster in a region without an audit-log
// tenant is Stalled with AuditLogTenantMissing naming the provider and region, before a
// credential is claimed or anything is written to the garden.
func TestLandscapeReachesTheShoot(t *testing.T) {
	runOperatorsWith(t, true, landscapeParams())
	poolSecret(t, "aws-shared-eu", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true", cp.LabelEUAccess: "true"})
	poolSecret(t, "aws-shared", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true"})
	poolSecret(t, "gcp-shared-l", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "eu-cluster"
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{"globalaccountid": "ga-1", "subaccountid": "sa-1", operatorv1alpha1.PlatformRegionLabel: "cf-eu11", operatorv1alpha1.RuntimeIDLabel: "rt-1"}},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Purpose: "production", Region: "eu-central-1"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "aws", MachineType: "m5.xlarge", AutoScalerMin: 3, AutoScalerMax: 5, NumberOfZones: 3},
			Administrators: []string{"admin@example.com"}}}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	sr := &cp.SubscriptionRequest{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sr); err != nil {
		t.Fatal(err)
	}
	if !sr.Spec.EUAccess || sr.Status.GardenerSecretName != "aws-shared-eu" {
		t.Errorf("SubscriptionRequest euAccess %v, credential %q; want the EU-access pool's", sr.Spec.EUAccess, sr.Status.GardenerSecretName)
	}
	s, err := getShoot(shoot.Name(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"spec.credentialsBindingName": "aws-shared-eu",
		"spec.accessRestrictions":     "[map[name:eu-access-only options:map[support.gardener.cloud/eu-access-for-cluster-addons:true support.gardener.cloud/eu-access-for-cluster-nodes:true]]]",
		"spec.dns.domain":             shoot.Name(ns, name) + ".kyma.example.com",
		"spec.kubernetes.kubeAPIServer.auditConfig.auditPolicy.configMapRef.name": auditPolicyConfigMap,
		"spec.resources":                                  "[map[name:auditlog-credentials resourceRef:map[apiVersion:v1 kind:Secret name:" + auditLogSecret + "]]]",
		"spec.maintenance.timeWindow.begin":               "000000+0000",
		"spec.maintenance.autoUpdate.machineImageVersion": "false",
		"metadata.labels.account":                         "ga-1",
		"metadata.labels.subaccount":                      "sa-1",
		"metadata.annotations.infrastructuremanager\\.kyma-project\\.io/runtime-id": "rt-1",
	} {
		fields := strings.Split(strings.ReplaceAll(path, "\\.", "\x00"), ".")
		for i := range fields {
			fields[i] = strings.ReplaceAll(fields[i], "\x00", ".")
		}
		if v, _, _ := unstructured.NestedFieldNoCopy(s.Object, fields...); fmt.Sprint(v) != want {
			t.Errorf("shoot %s = %v, want %s", path, v, want)
		}
	}
	var extensionTypes []string
	ext, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	for _, e := range ext {
		extensionTypes = append(extensionTypes, e.(map[string]any)["type"].(string))
	}
	if fmt.Sprint(extensionTypes) != "[shoot-cert-service shoot-dns-service shoot-auditlog-service]" {
		t.Errorf("extensions %v", extensionTypes)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	if got, _, _ := unstructured.NestedString(workers[0].(map[string]any), "providerConfig", "instanceMetadataOptions", "httpTokens"); got != "required" {
		t.Errorf("worker httpTokens %q", got)
	}

	// No audit-log tenant for gcp in europe-west4, and audit logging is mandatory.
	lost := gcpCluster("no-tenant", "europe-west4")
	if err := mgmt.Client.Create(ctx, lost); err != nil {
		t.Fatal(err)
	}
	cond := waitCondition(t, lost.Name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonAuditLogTenantMissing)
	if !strings.Contains(cond.Message, `provider "gcp" in region "europe-west4"`) || !strings.Contains(cond.Message, "landscape.auditLog.tenants.gcp.europe-west4") {
		t.Errorf("message %q does not name the provider and region", cond.Message)
	}
	if ready := waitCondition(t, lost.Name, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonAuditLogTenantMissing); ready.Message != cond.Message {
		t.Errorf("Ready says %q", ready.Message)
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: lost.Name}, &cp.SubscriptionRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Cluster without its audit-log tenant requested a credential: %v", err)
	}
	if _, err := getShoot(shoot.Name(ns, lost.Name)); !apierrors.IsNotFound(err) {
		t.Errorf("a Cluster without its audit-log tenant got a shoot: %v", err)
	}
}
