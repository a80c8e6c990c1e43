package shoot

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/apis/apiserver"
	apiserverv1beta1 "k8s.io/apiserver/pkg/apis/apiserver/v1beta1"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

func field(t *testing.T, obj map[string]any, path string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj, strings.Split(path, ".")...)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func worker(t *testing.T, s *unstructured.Unstructured) map[string]any {
	t.Helper()
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	if len(workers) != 1 {
		t.Fatalf("workers %v", workers)
	}
	return workers[0].(map[string]any)
}

// TestDesiredPerProvider: each provider's Shoot carries the configuration objects its
// extension demands, under its own API version, with subnets made of the node CIDR.
func TestDesiredPerProvider(t *testing.T) {
	for _, tc := range []struct {
		provider, region string
		want             map[string]any // path under spec → value (fmt.Sprint for non-strings)
		noControlPlane   bool
		noVolume         bool
	}{
		{provider: "aws", region: "eu-central-1", want: map[string]any{
			"provider.infrastructureConfig.networks.vpc.cidr": "10.250.0.0/16",
			"provider.infrastructureConfig.networks.zones":    "[map[internal:10.250.48.0/20 name:eu-central-1a public:10.250.32.0/20 workers:10.250.0.0/19] map[internal:10.250.112.0/20 name:eu-central-1b public:10.250.96.0/20 workers:10.250.64.0/19] map[internal:10.250.176.0/20 name:eu-central-1c public:10.250.160.0/20 workers:10.250.128.0/19]]",
			"provider.controlPlaneConfig.kind":                "ControlPlaneConfig",
		}},
		{provider: "azure", region: "westeurope", want: map[string]any{
			"provider.infrastructureConfig.networks.vnet.cidr": "10.250.0.0/16",
			"provider.infrastructureConfig.zoned":              "true",
			"provider.infrastructureConfig.networks.zones":     "[map[cidr:10.250.0.0/19 name:1 natGateway:map[enabled:true idleConnectionTimeoutMinutes:4]] map[cidr:10.250.32.0/19 name:2 natGateway:map[enabled:true idleConnectionTimeoutMinutes:4]] map[cidr:10.250.64.0/19 name:3 natGateway:map[enabled:true idleConnectionTimeoutMinutes:4]]]",
		}},
		{provider: "gcp", region: "europe-west3", want: map[string]any{
			"provider.infrastructureConfig.networks.workers": "10.250.0.0/16",
			"provider.controlPlaneConfig.zone":               "europe-west3-a",
		}},
		{provider: "openstack", region: "eu-de-1", noVolume: true, want: map[string]any{
			"provider.infrastructureConfig.networks.workers":       "10.250.0.0/16",
			"provider.infrastructureConfig.floatingPoolName":       "FloatingIP-external-kyma-01",
			"provider.controlPlaneConfig.loadBalancerProvider":     "f5",
			"provider.infrastructureConfig.networks.vpc":           "<nil>",
			"provider.infrastructureConfig.networks.zones":         "<nil>",
			"provider.controlPlaneConfig.zone":                     "<nil>",
			"provider.infrastructureConfig.networks.vnet":          "<nil>",
			"provider.infrastructureConfig.floatingPoolSubnetName": "<nil>",
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			c := cluster(tc.provider, tc.region, 3)
			c.Spec.Core.Purpose = "production"
			c.Spec.Infrastructure.AutoScalerMin, c.Spec.Infrastructure.AutoScalerMax = 3, 5
			s, err := Desired(c, DefaultParams(), "binding")
			if err != nil {
				t.Fatal(err)
			}
			spec := s.Object["spec"].(map[string]any)
			want := map[string]any{
				"provider.type": tc.provider,
				"provider.infrastructureConfig.apiVersion":            tc.provider + ".provider.extensions.gardener.cloud/v1alpha1",
				"provider.infrastructureConfig.kind":                  "InfrastructureConfig",
				"provider.workersSettings.sshAccess.enabled":          "false",
				"networking.nodes":                                    "10.250.0.0/16",
				"networking.pods":                                     "100.64.0.0/12",
				"networking.services":                                 "100.104.0.0/13",
				"networking.type":                                     "calico",
				"controlPlane.highAvailability.failureTolerance.type": "zone",
				"maintenance.timeWindow.begin":                        "220000+0000",
				"maintenance.timeWindow.end":                          "010000+0000",
				"maintenance.autoUpdate.kubernetesVersion":            "true",
				"maintenance.autoUpdate.machineImageVersion":          "true",
				"purpose":                             "production",
				"secretBindingName":                   "<nil>",
				"kubernetes.kubeAPIServer.oidcConfig": "<nil>",
			}
			if !tc.noControlPlane {
				want["provider.controlPlaneConfig.apiVersion"] = tc.provider + ".provider.extensions.gardener.cloud/v1alpha1"
			}
			for k, v := range tc.want {
				want[k] = v
			}
			for path, v := range want {
				if got := fmt.Sprint(field(t, spec, path)); got != fmt.Sprint(v) {
					t.Errorf("spec.%s = %s, want %v", path, got, v)
				}
			}
			w := worker(t, s)
			if w["maximum"].(int64) < int64(len(w["zones"].([]any))) {
				t.Errorf("worker maximum %v < zones %v", w["maximum"], w["zones"])
			}
			if fmt.Sprint(field(t, w, "machine.image")) != "map[name:gardenlinux]" {
				t.Errorf("machine image %v", field(t, w, "machine.image"))
			}
			if tc.noVolume != (w["volume"] == nil) {
				t.Errorf("worker volume %v", w["volume"])
			}
			// shoot-oidc-service is not enabled (issue 27): trustplane makes no OpenIDConnect
			// resources for it to serve; the zero landscape adds no extension.
			if ext, found := spec["extensions"]; found {
				t.Errorf("extensions %v without a landscape or Cluster extensions", ext)
			}
		})
	}
}

func TestVolumesAndImagesFollowTheSettings(t *testing.T) {
	p := DefaultParams()
	p.MachineImage = MachineImage{Name: "suse-chost", Version: "15.6.20250101"}
	p.VolumeTypes["openstack"] = "standard_hdd"
	p.VolumeSize = "50Gi"
	for provider, want := range map[string]string{"aws": "map[size:50Gi type:gp3]", "gcp": "map[size:50Gi type:pd-balanced]",
		"azure": "map[size:50Gi type:StandardSSD_LRS]", "openstack": "map[size:50Gi type:standard_hdd]"} {
		s, err := Desired(cluster(provider, "r", 1), p, "b")
		if err != nil {
			t.Fatal(err)
		}
		w := worker(t, s)
		if got := fmt.Sprint(w["volume"]); got != want {
			t.Errorf("%s volume %s, want %s", provider, got, want)
		}
		if got := fmt.Sprint(field(t, w, "machine.image")); got != "map[name:suse-chost version:15.6.20250101]" {
			t.Errorf("%s image %s", provider, got)
		}
	}
	p.HAFailureTolerance = ""
	c := cluster("gcp", "r", 1)
	c.Spec.Core.Purpose = "production"
	s, _ := Desired(c, p, "b")
	if _, found := s.Object["spec"].(map[string]any)["controlPlane"]; found {
		t.Error("an HA control plane without --shoot-ha-failure-tolerance")
	}
}

// mainZones are the zones of a Cluster with the main pool alone, in n zones.
func mainZones(t *testing.T, provider, region string, n int) poolZones {
	t.Helper()
	z, err := zonesOf(operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: region},
		Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: provider, NumberOfZones: int32(n)}})
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// TestZoneSubnetsStayInsideTheNodes: for every node CIDR size the generator accepts, the
// zone subnets lie inside the node CIDR, are canonical, and do not overlap one another —
// what the AWS and Azure InfrastructureConfig validations check.
func TestZoneSubnetsStayInsideTheNodes(t *testing.T) {
	for bits := minNodesPrefix; bits <= maxNodesPrefix; bits++ {
		nodes := netip.PrefixFrom(netip.MustParseAddr("10.250.0.0"), bits).Masked()
		aws, err := awsZoneSubnets(nodes, mainZones(t, "aws", "eu-central-1", 3))
		if err != nil {
			t.Fatal(err)
		}
		var all []netip.Prefix
		for _, z := range aws {
			for _, key := range []string{"workers", "public", "internal"} {
				all = append(all, netip.MustParsePrefix(z.(map[string]any)[key].(string)))
			}
		}
		azure, err := azureZoneSubnets(nodes, mainZones(t, "azure", "westeurope", 3))
		if err != nil {
			t.Fatal(err)
		}
		var azureCIDRs []netip.Prefix
		for _, z := range azure {
			azureCIDRs = append(azureCIDRs, netip.MustParsePrefix(z.(map[string]any)["cidr"].(string)))
		}
		for _, set := range [][]netip.Prefix{all, azureCIDRs} {
			for i, a := range set {
				if !nodes.Contains(a.Addr()) || a.Bits() < nodes.Bits() || a.Masked() != a {
					t.Errorf("nodes %s: subnet %s is outside or not canonical", nodes, a)
				}
				for _, b := range set[i+1:] {
					if overlap(a, b) {
						t.Errorf("nodes %s: subnets %s and %s overlap", nodes, a, b)
					}
				}
			}
		}
	}
	zones := mainZones(t, "aws", "eu-central-1", 1)
	for _, bad := range []string{"10.250.0.0/15", "10.250.0.0/25", "fd00::/64"} {
		if _, err := awsZoneSubnets(netip.MustParsePrefix(bad), zones); err == nil {
			t.Errorf("nodes %s: zone subnets derived", bad)
		}
	}
}

func TestAuthenticationConfigMap(t *testing.T) {
	c := cluster("aws", "eu-central-1", 1)
	if cm, err := AuthenticationConfigMap(c, DefaultParams()); cm != nil || err != nil {
		t.Fatalf("no OIDC: %v, %v", cm, err)
	}
	c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
		UsernameClaim: "email", UsernamePrefix: "-", SigningAlgs: []string{"RS256"}}
	cm, err := AuthenticationConfigMap(c, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	shootName := Name(c.Namespace, c.Name)
	if cm.Namespace != "garden-kyma" || cm.Name != "structured-auth-config-"+shootName || cm.Labels[operatorv1alpha1.ClusterNameLabel] != c.Name {
		t.Errorf("ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
	}
	s, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := field(t, s.Object, "spec.kubernetes.kubeAPIServer.structuredAuthentication.configMapName"); got != cm.Name {
		t.Errorf("the Shoot names ConfigMap %v, want %s", got, cm.Name)
	}
	config := decodeAuthentication(t, cm.Data[AuthenticationConfigKey])
	jwt := config.JWT[0]
	if jwt.Issuer.URL != "https://issuer.example" || fmt.Sprint(jwt.Issuer.Audiences) != "[kyma]" ||
		jwt.ClaimMappings.Username.Claim != "email" || *jwt.ClaimMappings.Username.Prefix != "" ||
		jwt.ClaimMappings.Groups.Claim != "groups" || *jwt.ClaimMappings.Groups.Prefix != "" {
		t.Errorf("authenticator %+v", jwt)
	}

	// The legacy default prefix: the issuer for any claim but email.
	c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example/tenant"}
	cm, _ = AuthenticationConfigMap(c, DefaultParams())
	jwt = decodeAuthentication(t, cm.Data[AuthenticationConfigKey]).JWT[0]
	if jwt.ClaimMappings.Username.Claim != "sub" || *jwt.ClaimMappings.Username.Prefix != "https://issuer.example/tenant#" || jwt.ClaimMappings.Groups.Claim != "" {
		t.Errorf("defaults: %+v", jwt.ClaimMappings)
	}
}

// decodeAuthentication reads the ConfigMap's data as Gardener's webhook does and runs
// kube-apiserver's own validation of it: what the generator writes is accepted.
func decodeAuthentication(t *testing.T, raw string) *apiserver.AuthenticationConfiguration {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiserverv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiserver.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder().Decode([]byte(raw), nil, nil)
	if err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	if gvk.GroupVersion().String() != AuthenticationConfigAPIVersion {
		t.Errorf("version %v", gvk)
	}
	config := obj.(*apiserver.AuthenticationConfiguration)
	if errs := apiservervalidation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), config, nil); len(errs) > 0 {
		t.Errorf("kube-apiserver refuses %s: %v", raw, errs.ToAggregate())
	}
	// The check can fail: the same authenticator without its username prefix is refused.
	broken := config.DeepCopy()
	broken.JWT[0].ClaimMappings.Username.Prefix = nil
	if errs := apiservervalidation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), broken, nil); len(errs) == 0 {
		t.Error("kube-apiserver's validation accepts a username claim without a prefix: the check proves nothing")
	}
	return config
}

// TestSeedExampleIsRefusedWithEveryProblem: the seed's example Cluster, taken literally
// (issuer "asdf", algorithm "adsf"), is one Gardener would refuse: every problem is named.
func TestSeedExampleIsRefusedWithEveryProblem(t *testing.T) {
	c := cluster("aws", "eu-central-1", 3)
	c.Spec.Core.Purpose = "production"
	c.Spec.Infrastructure.AutoScalerMin, c.Spec.Infrastructure.AutoScalerMax = 5, 5
	c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "asdf", GroupsClaim: "asdf", IssuerURL: "asdf", SigningAlgs: []string{"adsf"},
		UsernameClaim: "asdf", UsernamePrefix: "asdf"}
	_, err := Desired(c, DefaultParams(), "b")
	var invalid *InvalidError
	if !errors.As(err, &invalid) || len(invalid.Problems) != 2 ||
		!strings.Contains(err.Error(), `issuerURL "asdf" must be an https URL`) || !strings.Contains(err.Error(), `signingAlgs: "adsf"`) {
		t.Errorf("Desired: %v", err)
	}
}

func TestValidateFindsWhatGardenerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*operatorv1alpha1.Cluster, *Params)
		want   []string
	}{
		{"fewer nodes than zones", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.NumberOfZones, c.Spec.Infrastructure.AutoScalerMin, c.Spec.Infrastructure.AutoScalerMax = 3, 1, 2
		}, []string{"autoScalerMax 2 is less than numberOfZones 3"}},
		{"too many zones", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.NumberOfZones, c.Spec.Infrastructure.AutoScalerMax = 4, 4
		}, []string{"numberOfZones 4: aws regions have 3 zones"}},
		{"bad CIDRs, each named", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{Nodes: "10.250.0.1/16", Pods: "100.64.0.0", Services: "fd00::/108"}
		}, []string{`nodes "10.250.0.1/16": not canonical`, `pods "100.64.0.0": not a CIDR`, "services fd00::/108: only IPv4"}},
		{"overlapping CIDRs", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{Pods: "10.250.128.0/17"}
		}, []string{"nodes 10.250.0.0/16 overlaps pods 10.250.128.0/17"}},
		{"nodes too small for zone subnets", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{Nodes: "10.250.0.0/26"}
		}, []string{"prefix length must be between 16 and 24"}},
		{"IPv6 nodes", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{Nodes: "fd00::/64"}
		}, []string{"only IPv4"}},
		{"no cloud profile", func(_ *operatorv1alpha1.Cluster, p *Params) { delete(p.CloudProfiles, "aws") }, []string{"no cloud profile is configured"}},
		{"no volume type", func(_ *operatorv1alpha1.Cluster, p *Params) { delete(p.VolumeTypes, "aws") }, []string{"aws shoots need a worker volume type"}},
	} {
		t.Run(tc.name, func(t *testing.T) { assertInvalid(t, tc.change, tc.want) })
	}
}

// assertInvalid: an aws Cluster changed by change is one Validate refuses naming each of
// want, and Desired builds no Shoot of.
func assertInvalid(t *testing.T, change func(*operatorv1alpha1.Cluster, *Params), want []string) {
	t.Helper()
	c := cluster("aws", "eu-central-1", 1)
	p := DefaultParams()
	change(c, &p)
	err := Validate(c.Spec, p)
	var invalid *InvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("Validate: %v, want an InvalidError", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\nlacks %q", err, w)
		}
	}
	if _, err := Desired(c, p, "b"); !errors.As(err, &invalid) {
		t.Errorf("Desired built a Shoot Gardener would refuse: %v", err)
	}
}

func TestCheckUpdate(t *testing.T) {
	c := cluster("aws", "eu-central-1", 2)
	live, _ := Desired(c, DefaultParams(), "b")
	same, _ := Desired(c, DefaultParams(), "b")
	if err := CheckUpdate(live, same); err != nil {
		t.Errorf("no change: %v", err)
	}
	c.Spec.Infrastructure.NumberOfZones = 3
	more, _ := Desired(c, DefaultParams(), "b")
	if err := CheckUpdate(live, more); err != nil {
		t.Errorf("a zone added: %v", err)
	}
	c.Spec.Infrastructure.NumberOfZones = 1
	c.Spec.Core.Region = "eu-west-1"
	c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{Nodes: "10.200.0.0/16"}
	changed, _ := Desired(c, DefaultParams(), "b")
	err := CheckUpdate(live, changed)
	for _, want := range []string{"spec.region cannot change", "spec.networking.nodes cannot change", "zones can be added but not removed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckUpdate: %v; want %q", err, want)
		}
	}
}

func TestParamsValidate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	p := DefaultParams()
	p.VolumeSize = "80G"
	p.Maintenance = Maintenance{Begin: "220000+0000", End: "221000+0000"}
	p.Networking.Pods = "10.250.0.0/12"
	p.CloudProfiles["alicloud"] = "ali"
	p.HAFailureTolerance = "region"
	err := p.Validate()
	for _, want := range []string{"--shoot-volume-size", "30 minutes to 6 hours", "not canonical", `"alicloud"`, "--shoot-ha-failure-tolerance"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want %q", err, want)
		}
	}
	// A window across midnight in another time zone: 23:00 to 01:00 at +0200 is 2 hours.
	if err := validWindow("230000+0200", "010000+0200"); err != nil {
		t.Error(err)
	}
}
