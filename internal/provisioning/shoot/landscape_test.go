package shoot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

var testRegions = map[string]string{"aws": "eu-central-1", "azure": "westeurope", "gcp": "europe-west3", "openstack": "eu-de-1"}

// spec reads a field of a Shoot's spec ("" for none), fmt.Sprint for non-strings.
func specField(s *unstructured.Unstructured, path string) string {
	v, found, _ := unstructured.NestedFieldNoCopy(s.Object, append([]string{"spec"}, strings.Split(path, ".")...)...)
	if !found {
		return ""
	}
	return fmt.Sprint(v)
}

func extensionOf(s *unstructured.Unstructured, typ string) map[string]any {
	list, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	for _, e := range list {
		if m := e.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestLandscapeOptions: every landscape option, alone, for every provider and purpose:
// rendered where it applies, as infrastructure-manager renders it, and nowhere else; the
// zero landscape adds nothing. Each option's check names what it mirrors.
func TestLandscapeOptions(t *testing.T) {
	tenant := func(provider string) AuditLogTenant {
		return AuditLogTenant{TenantID: "tenant-" + provider, ServiceURL: "https://auditlog.example:8081", SecretName: "auditlog-" + provider}
	}
	allTenants := map[string]map[string]AuditLogTenant{}
	for p, r := range testRegions {
		allTenants[p] = map[string]AuditLogTenant{r: tenant(p)}
	}
	type input struct {
		provider, purpose string
		shoot             *unstructured.Unstructured
		err               error
	}
	for _, option := range []struct {
		name      string
		configure func(*Landscape, *operatorv1alpha1.Cluster)
		check     func(t *testing.T, in input)
	}{
		{"zero landscape", func(*Landscape, *operatorv1alpha1.Cluster) {}, func(t *testing.T, in input) {
			for _, path := range []string{"extensions", "resources", "dns", "exposureClassName", "accessRestrictions", "tolerations", "kubernetes"} {
				if v := specField(in.shoot, path); v != "" {
					t.Errorf("spec.%s = %s", path, v)
				}
			}
			if in.shoot.GetAnnotations() != nil {
				t.Errorf("annotations %v", in.shoot.GetAnnotations())
			}
		}},
		// extender/auditlogs and extensions/auditlog.go: extension, credentials resource, policy.
		{"audit log tenant", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.AuditLog = AuditLog{Mandatory: true, PolicyConfigMapName: "audit-policy", Tenants: allTenants}
		}, func(t *testing.T, in input) {
			ext := extensionOf(in.shoot, AuditLogExtension)
			want := fmt.Sprintf("map[apiVersion:service.auditlog.extensions.gardener.cloud/v1alpha1 kind:AuditlogConfig secretReferenceName:auditlog-credentials serviceURL:https://auditlog.example:8081 tenantID:tenant-%s type:standard]", in.provider)
			if ext == nil || fmt.Sprint(ext["providerConfig"]) != want {
				t.Errorf("audit-log extension %v, want providerConfig %s", ext, want)
			}
			if got := specField(in.shoot, "resources"); got != "[map[name:auditlog-credentials resourceRef:map[apiVersion:v1 kind:Secret name:auditlog-"+in.provider+"]]]" {
				t.Errorf("resources %s", got)
			}
			if got := specField(in.shoot, "kubernetes.kubeAPIServer.auditConfig.auditPolicy.configMapRef.name"); got != "audit-policy" {
				t.Errorf("audit policy %q", got)
			}
		}},
		// fsm/runtime_fsm_create_shoot.go: mandatory and missing stops, naming provider and region.
		{"audit log mandatory, tenant missing", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.AuditLog = AuditLog{Mandatory: true, PolicyConfigMapName: "audit-policy",
				Tenants: map[string]map[string]AuditLogTenant{"aws": {"us-east-1": tenant("aws")}}}
		}, func(t *testing.T, in input) {
			var missing *AuditLogTenantMissingError
			if !errors.As(in.err, &missing) || missing.Provider != in.provider || missing.Region != testRegions[in.provider] ||
				!strings.Contains(in.err.Error(), fmt.Sprintf("provider %q in region %q", in.provider, testRegions[in.provider])) {
				t.Errorf("Desired: %v, want the missing tenant named", in.err)
			}
		}},
		{"audit log optional, tenant missing", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.AuditLog = AuditLog{PolicyConfigMapName: "audit-policy", Tenants: map[string]map[string]AuditLogTenant{"aws": {"us-east-1": tenant("aws")}}}
		}, func(t *testing.T, in input) {
			if in.err != nil || extensionOf(in.shoot, AuditLogExtension) != nil || specField(in.shoot, "resources") != "" || specField(in.shoot, "kubernetes") != "" {
				t.Errorf("audit logging without a tenant: %v, %v", in.err, in.shoot)
			}
		}},
		// extender/dns.go, extensions/dns.go: the landscape's domain and provider.
		{"dns", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.DNS = DNS{ProviderType: "aws-route53", SecretName: "route53", Domain: "kyma.example.com"}
		}, func(t *testing.T, in input) {
			want := "map[domain:" + in.shoot.GetName() + ".kyma.example.com providers:[map[credentialsRef:map[apiVersion:v1 kind:Secret name:route53] primary:true type:aws-route53]]]"
			if got := specField(in.shoot, "dns"); got != want {
				t.Errorf("dns %s, want %s", got, want)
			}
			ext := extensionOf(in.shoot, DNSExtension)
			if ext == nil || fmt.Sprint(ext["providerConfig"]) != "map[apiVersion:service.dns.extensions.gardener.cloud/v1alpha1 dnsProviderReplication:map[enabled:true] kind:DNSConfig syncProvidersFromShootSpecDNS:true]" {
				t.Errorf("dns extension %v", ext)
			}
		}},
		// extensions/dns.go NewDNSExtensionInternal: the extension in Gardener's own domain.
		{"dns service only", func(l *Landscape, _ *operatorv1alpha1.Cluster) { l.DNSService = true }, func(t *testing.T, in input) {
			ext := extensionOf(in.shoot, DNSExtension)
			if ext == nil || fmt.Sprint(ext["providerConfig"]) != "map[apiVersion:service.dns.extensions.gardener.cloud/v1alpha1 kind:DNSConfig syncProvidersFromShootSpecDNS:true]" || specField(in.shoot, "dns") != "" {
				t.Errorf("dns extension %v, dns %s", ext, specField(in.shoot, "dns"))
			}
		}},
		// extensions/cert.go: shoot issuers.
		{"cert service", func(l *Landscape, _ *operatorv1alpha1.Cluster) { l.CertService = true }, func(t *testing.T, in input) {
			ext := extensionOf(in.shoot, CertExtension)
			if ext == nil || fmt.Sprint(ext["providerConfig"]) != "map[apiVersion:service.cert.extensions.gardener.cloud/v1alpha1 kind:CertConfig shootIssuers:map[enabled:true]]" {
				t.Errorf("cert extension %v", ext)
			}
		}},
		// fsm/maintenanceWindow.go: the region's window for production only.
		{"maintenance windows", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.Maintenance.Windows = map[string]MaintenanceWindow{}
			for _, r := range testRegions {
				l.Maintenance.Windows[r] = MaintenanceWindow{Begin: "030000+0100", End: "050000+0100"}
			}
		}, func(t *testing.T, in input) {
			want := "map[begin:220000+0000 end:010000+0000]" // --shoot-maintenance-begin/end
			if in.purpose == "production" {
				want = "map[begin:030000+0100 end:050000+0100]"
			}
			if got := specField(in.shoot, "maintenance.timeWindow"); got != want {
				t.Errorf("time window %s, want %s", got, want)
			}
		}},
		// extender/maintenance/maintenance.go: the auto-update switches.
		{"auto update", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.Maintenance.AutoUpdate = AutoUpdate{MachineImageVersion: ptr.To(false)}
		}, func(t *testing.T, in input) {
			if got := specField(in.shoot, "maintenance.autoUpdate"); got != "map[kubernetesVersion:true machineImageVersion:false]" {
				t.Errorf("autoUpdate %s", got)
			}
		}},
		// exposure_classname_extender.go: OpenStack's exposure class.
		{"exposure class", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.ExposureClasses = map[string]string{"openstack": "converged-cloud-internet"}
		}, func(t *testing.T, in input) {
			want := map[bool]string{true: "converged-cloud-internet"}[in.provider == "openstack"]
			if got := specField(in.shoot, "exposureClassName"); got != want {
				t.Errorf("exposureClassName %q, want %q", got, want)
			}
		}},
		// restrictions/restrictions.go: eu-access-only for the listed platform regions.
		{"eu access", func(l *Landscape, c *operatorv1alpha1.Cluster) {
			l.EUAccess.PlatformRegions = []string{"cf-eu11", "cf-ch20"}
			c.Labels[operatorv1alpha1.PlatformRegionLabel] = "cf-eu11"
		}, func(t *testing.T, in input) {
			want := "[map[name:eu-access-only options:map[support.gardener.cloud/eu-access-for-cluster-addons:true support.gardener.cloud/eu-access-for-cluster-nodes:true]]]"
			if got := specField(in.shoot, "accessRestrictions"); got != want {
				t.Errorf("accessRestrictions %s, want %s", got, want)
			}
		}},
		{"eu access, another platform region", func(l *Landscape, c *operatorv1alpha1.Cluster) {
			l.EUAccess.PlatformRegions = []string{"cf-eu11"}
			c.Labels[operatorv1alpha1.PlatformRegionLabel] = "cf-eu10"
		}, func(t *testing.T, in input) {
			if got := specField(in.shoot, "accessRestrictions"); got != "" {
				t.Errorf("accessRestrictions %s", got)
			}
		}},
		// provider/provider.go setWorkerConfig, hyperscaler/aws/config.go: IMDSv2 on AWS.
		{"aws imdsv2", func(l *Landscape, _ *operatorv1alpha1.Cluster) { l.AWS.EnableIMDSv2 = true }, func(t *testing.T, in input) {
			w := worker(t, in.shoot)
			want := map[bool]string{true: "map[apiVersion:aws.provider.extensions.gardener.cloud/v1alpha1 instanceMetadataOptions:map[httpPutResponseHopLimit:2 httpTokens:required] kind:WorkerConfig]", false: "<nil>"}[in.provider == "aws"]
			if got := fmt.Sprint(w["providerConfig"]); got != want {
				t.Errorf("worker providerConfig %s, want %s", got, want)
			}
		}},
		// tolerations.go: a region's seed taints.
		{"tolerations", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.Tolerations = map[string][]string{testRegions["gcp"]: {"ksa-assured-workload"}}
		}, func(t *testing.T, in input) {
			want := map[bool]string{true: "[map[key:ksa-assured-workload]]"}[in.provider == "gcp"]
			if got := specField(in.shoot, "tolerations"); got != want {
				t.Errorf("tolerations %q, want %q", got, want)
			}
		}},
		// structuredauth/oidcconfig.go GetOIDCConfigOrDefault: the default issuer.
		{"default oidc", func(l *Landscape, _ *operatorv1alpha1.Cluster) {
			l.DefaultOIDC = &LandscapeOIDC{ClientID: "kyma", IssuerURL: "https://default.example"}
		}, func(t *testing.T, in input) {
			if got := specField(in.shoot, "kubernetes.kubeAPIServer.structuredAuthentication.configMapName"); got != AuthenticationConfigMapName(in.shoot.GetName()) {
				t.Errorf("structured authentication %q", got)
			}
		}},
		// extender/labels.go, extender/annotations.go.
		{"infrastructure-manager metadata", func(l *Landscape, c *operatorv1alpha1.Cluster) {
			l.InfrastructureManagerMetadata = true
			c.Labels["globalaccountid"], c.Labels["subaccountid"], c.Labels[operatorv1alpha1.RuntimeIDLabel] = "ga-1", "sa-1", "rt-1"
			c.Generation = 7
		}, func(t *testing.T, in input) {
			l, a := in.shoot.GetLabels(), in.shoot.GetAnnotations()
			if l[operatorv1alpha1.KIMAccountLabel] != "ga-1" || l[operatorv1alpha1.KIMSubaccountLabel] != "sa-1" || a[operatorv1alpha1.KIMRuntimeIDAnnotation] != "rt-1" || a[operatorv1alpha1.KIMRuntimeGenerationAnnotation] != "7" ||
				l[operatorv1alpha1.ClusterNameLabel] != "c1" || l[operatorv1alpha1.ClusterNamespaceLabel] != "kcp" {
				t.Errorf("labels %v annotations %v", l, a)
			}
		}},
		// The landscape's extensions replace a Cluster's entry of their type; others stay.
		{"cluster extensions beside the landscape's", func(l *Landscape, c *operatorv1alpha1.Cluster) {
			l.CertService = true
			c.Spec.Extensions = &runtime.RawExtension{Raw: []byte(`[{"type":"shoot-cert-service","disabled":true},{"type":"shoot-networking-filter","disabled":true}]`)}
		}, func(t *testing.T, in input) {
			if got := specField(in.shoot, "extensions"); got != "[map[disabled:true type:shoot-networking-filter] map[providerConfig:map[apiVersion:service.cert.extensions.gardener.cloud/v1alpha1 kind:CertConfig shootIssuers:map[enabled:true]] type:shoot-cert-service]]" {
				t.Errorf("extensions %s", got)
			}
		}},
	} {
		for _, provider := range []string{"aws", "azure", "gcp", "openstack"} {
			for _, purpose := range []string{"evaluation", "development", "production", "testing"} {
				t.Run(option.name+"/"+provider+"/"+purpose, func(t *testing.T) {
					c := cluster(provider, testRegions[provider], 3)
					c.Spec.Core.Purpose = purpose
					c.Spec.Infrastructure.AutoScalerMin, c.Spec.Infrastructure.AutoScalerMax = 3, 5
					p := DefaultParams()
					option.configure(&p.Landscape, c)
					if err := p.Validate(); err != nil {
						t.Fatalf("the landscape is invalid: %v", err)
					}
					s, err := Desired(c, p, "binding")
					if err != nil && option.name != "audit log mandatory, tenant missing" {
						t.Fatal(err)
					}
					option.check(t, input{provider: provider, purpose: purpose, shoot: s, err: err})
				})
			}
		}
	}
}

func TestDefaultOIDCAndTheClustersOwn(t *testing.T) {
	p := DefaultParams()
	p.Landscape.DefaultOIDC = &LandscapeOIDC{ClientID: "kyma", IssuerURL: "https://default.example", UsernamePrefix: "-"}
	c := cluster("aws", "eu-central-1", 1)
	cm, err := AuthenticationConfigMap(c, p)
	if err != nil || cm == nil || !strings.Contains(cm.Data[AuthenticationConfigKey], "url: https://default.example") {
		t.Fatalf("default OIDC: %v, %v", cm, err)
	}
	decodeAuthentication(t, cm.Data[AuthenticationConfigKey])
	c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "own", IssuerURL: "https://own.example"}
	if cm, _ := AuthenticationConfigMap(c, p); !strings.Contains(cm.Data[AuthenticationConfigKey], "https://own.example") ||
		strings.Contains(cm.Data[AuthenticationConfigKey], "default.example") {
		t.Errorf("the Cluster's own OIDC does not win: %s", cm.Data[AuthenticationConfigKey])
	}
}

func TestEUAccessOnly(t *testing.T) {
	p := DefaultParams()
	c := cluster("aws", "eu-central-1", 1)
	c.Labels[operatorv1alpha1.PlatformRegionLabel] = "cf-eu11"
	if EUAccessOnly(c, p) {
		t.Error("EU access without a landscape listing the platform region")
	}
	p.Landscape.EUAccess.PlatformRegions = []string{"cf-eu11"}
	if !EUAccessOnly(c, p) {
		t.Error("cf-eu11 is listed")
	}
	delete(c.Labels, operatorv1alpha1.PlatformRegionLabel)
	if EUAccessOnly(c, p) {
		t.Error("EU access without a platform region")
	}
}

func TestLandscapeValidate(t *testing.T) {
	l := Landscape{
		AuditLog: AuditLog{Mandatory: true, Tenants: map[string]map[string]AuditLogTenant{
			"alicloud": {"r": {}},
			"aws":      {"eu-central-1": {TenantID: "", ServiceURL: "http://x", SecretName: "Bad_Name"}}}},
		DNS:             DNS{ProviderType: "route53", Domain: "example.com"},
		Maintenance:     LandscapeMaintenance{Windows: map[string]MaintenanceWindow{"eu-de-1": {Begin: "220000+0000", End: "221000+0000"}}},
		ExposureClasses: map[string]string{"openstack": "Not A Name", "vsphere": "x"},
		EUAccess:        EUAccess{PlatformRegions: []string{""}},
		Tolerations:     map[string][]string{"me-central2": {"a", "a", "not a key!"}},
		DefaultOIDC:     &LandscapeOIDC{IssuerURL: "http://issuer"},
	}
	err := l.Validate()
	for _, want := range []string{
		`auditLog.tenants: "alicloud" is not one of`,
		"auditLog.tenants.aws.eu-central-1.tenantID is required",
		`auditLog.tenants.aws.eu-central-1.serviceURL "http://x" must be an https URL`,
		`auditLog.tenants.aws.eu-central-1.secretName "Bad_Name"`,
		"auditLog.policyConfigMapName is required with auditLog.tenants",
		"dns.providerType, dns.secretName and dns.domain go together",
		`dns.providerType "route53" is not one of`,
		"maintenance.windows.eu-de-1:",
		`exposureClasses.openstack "Not A Name"`,
		`exposureClasses: "vsphere" is not one of`,
		`euAccess.platformRegions[0] ""`,
		`tolerations.me-central2: "a" twice`,
		`tolerations.me-central2: "not a key!" is not a taint key`,
		"defaultOIDC: clientID is required",
		`defaultOIDC: issuerURL "http://issuer" must be an https URL`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nlacks %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("not one line: %q", err)
	}
	if err := (&Landscape{AuditLog: AuditLog{Mandatory: true}}).Validate(); err == nil || !strings.Contains(err.Error(), "auditLog.mandatory needs auditLog.tenants") {
		t.Errorf("mandatory without tenants: %v", err)
	}
	if err := (&Landscape{}).Validate(); err != nil {
		t.Errorf("the zero landscape: %v", err)
	}
	p := DefaultParams()
	p.Landscape.DNS.Domain = "x.example"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "landscape: dns.providerType") {
		t.Errorf("Params.Validate does not check the landscape: %v", err)
	}
}

// TestKeepLive: settings Gardener does not let change on an existing Shoot, and versions
// Gardener raised, stay as the Shoot has them; everything else follows the settings.
func TestKeepLive(t *testing.T) {
	c := cluster("openstack", "eu-de-1", 1)
	old := DefaultParams()
	old.CloudProfiles["openstack"] = "converged-cloud-cp"
	old.KubernetesVersion, old.MachineImage.Version = "1.33.2", "1592.4.0"
	old.Landscape.DNS = DNS{ProviderType: "openstack-designate", SecretName: "designate", Domain: "old.example.com"}
	live, err := Desired(c, old, "b")
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(live.Object, "1.33.5", "spec", "kubernetes", "version") // Gardener's maintenance
	workers, _, _ := unstructured.NestedSlice(live.Object, "spec", "provider", "workers")
	_ = unstructured.SetNestedField(workers[0].(map[string]any), "1592.9.0", "machine", "image", "version")
	_ = unstructured.SetNestedSlice(live.Object, workers, "spec", "provider", "workers")

	now := DefaultParams() // converged-cloud-kyma
	now.KubernetesVersion, now.MachineImage.Version = "1.33.3", "1592.5.0"
	now.Landscape.DNS = DNS{ProviderType: "openstack-designate", SecretName: "designate", Domain: "new.example.com"}
	now.Landscape.ExposureClasses = map[string]string{"openstack": "converged-cloud-internet"}
	desired, _ := Desired(c, now, "b")
	KeepLive(live, desired)
	for path, want := range map[string]string{
		"cloudProfile.name":  "converged-cloud-cp",
		"dns.domain":         Name("kcp", "c1") + ".old.example.com",
		"kubernetes.version": "1.33.5",
		"exposureClassName":  "converged-cloud-internet", // allowed to change
	} {
		if got := specField(desired, path); got != want {
			t.Errorf("spec.%s = %q, want %q", path, got, want)
		}
	}
	if got := fmt.Sprint(field(t, worker(t, desired), "machine.image.version")); got != "1592.9.0" {
		t.Errorf("machine image version %s", got)
	}
	if err := CheckUpdate(live, desired); err != nil {
		t.Errorf("CheckUpdate after KeepLive: %v", err)
	}
	// A newer setting than the Shoot's wins.
	now.KubernetesVersion = "1.34.0"
	desired, _ = Desired(c, now, "b")
	KeepLive(live, desired)
	if got := specField(desired, "kubernetes.version"); got != "1.34.0" {
		t.Errorf("kubernetes.version %q", got)
	}
	// A new Shoot (no live one) takes the settings.
	fresh, _ := Desired(c, now, "b")
	KeepLive(nil, fresh)
	if got := specField(fresh, "cloudProfile.name"); got != "converged-cloud-kyma" {
		t.Errorf("a new Shoot's cloud profile %q", got)
	}
}

func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"1.33.5", "1.33.2", true}, {"1.33.2", "1.33.5", false}, {"1.34", "1.33.9", true}, {"1592.9.0", "1592.10.0", false},
		{"1.33.2", "1.33.2", false}, {"", "1.33.2", false}, {"1.33.x", "1.33.2", false}} {
		if got := newer(tc.a, tc.b); got != tc.want {
			t.Errorf("newer(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}
