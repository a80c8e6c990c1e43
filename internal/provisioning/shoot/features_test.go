package shoot

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// awsZoneCIDRs are the workers CIDRs of the AWS InfrastructureConfig's zones, by name.
func awsZoneCIDRs(t *testing.T, s *unstructured.Unstructured) map[string]string {
	t.Helper()
	zones, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
	out := map[string]string{}
	for _, z := range zones {
		m := z.(map[string]any)
		out[m["name"].(string)] = m["workers"].(string)
	}
	return out
}

// TestAPoolsZoneKeepsEveryZonesSubnets: a zone's subnets follow from its place in the
// region, so a pool in the region's third zone gives that zone the same subnets whether
// or not the main pool spreads to the second later; Gardener refuses to change a zone's
// subnets. Pools without zones take the main pool's.
func TestAPoolsZoneKeepsEveryZonesSubnets(t *testing.T) {
	c := cluster("aws", "eu-central-1", 1)
	c.Spec.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{
		{Name: "gpu", MachineType: "g5.xlarge", AutoScalerMax: 2, Zones: []string{"eu-central-1c"}},
		{Name: "mem", MachineType: "r6i.large", AutoScalerMax: 2},
	}
	before, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Infrastructure.NumberOfZones, c.Spec.Infrastructure.AutoScalerMax = 2, 4
	after, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	was, now := awsZoneCIDRs(t, before), awsZoneCIDRs(t, after)
	if fmt.Sprint(was) != "map[eu-central-1a:10.250.0.0/19 eu-central-1c:10.250.128.0/19]" {
		t.Errorf("zones of a 1-zone main pool and a pool in zone c: %v", was)
	}
	for zone, cidr := range was {
		if now[zone] != cidr {
			t.Errorf("zone %s moved from %s to %s when the main pool grew to a second zone", zone, cidr, now[zone])
		}
	}
	if len(now) != 3 {
		t.Errorf("zones after the main pool grew: %v", now)
	}
	workers, _, _ := unstructured.NestedSlice(after.Object, "spec", "provider", "workers")
	zonesOf := map[string]string{}
	for _, w := range workers {
		m := w.(map[string]any)
		zonesOf[m["name"].(string)] = fmt.Sprint(m["zones"], " surge ", m["maxSurge"])
	}
	if want := "map[cpu-worker-0:[eu-central-1a eu-central-1b] surge 2 gpu:[eu-central-1c] surge 1 mem:[eu-central-1a eu-central-1b] surge 2]"; fmt.Sprint(zonesOf) != want {
		t.Errorf("pools' zones %v, want %s", zonesOf, want)
	}
}

// TestPoolsTakeTheirOwnVolumeLabelsAndTaints: a pool's volume, labels and taints reach
// its worker, the operator's volume type filling an empty one; the main pool keeps the
// operator's volume.
func TestPoolsTakeTheirOwnVolumeLabelsAndTaints(t *testing.T) {
	c := cluster("gcp", "europe-west3", 1)
	c.Spec.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{{Name: "gpu", MachineType: "a2", AutoScalerMax: 1,
		Volume: &operatorv1alpha1.WorkerVolume{Size: "200Gi"}, Labels: map[string]operatorv1alpha1.LabelValue{"role": "gpu"},
		Taints: []operatorv1alpha1.WorkerTaint{{Key: "gpu", Effect: "NoExecute"}}}}
	s, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	got := map[string]string{}
	for _, w := range workers {
		m := w.(map[string]any)
		got[m["name"].(string)] = fmt.Sprintf("%v|%v|%v|%v", m["volume"], m["labels"], m["taints"], m["cri"])
	}
	want := map[string]string{
		"cpu-worker-0": "map[size:80Gi type:pd-balanced]|<nil>|<nil>|<nil>",
		"gpu":          "map[size:200Gi type:pd-balanced]|map[role:gpu]|[map[effect:NoExecute key:gpu]]|<nil>",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workers %v, want %v", got, want)
	}
}

// TestRegistryCachesNeedContainerd: with a registry cache every worker names containerd,
// as the extension's admission demands, and the caches carry the extension's defaults.
func TestRegistryCachesNeedContainerd(t *testing.T) {
	c := cluster("aws", "eu-central-1", 1)
	c.Spec.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{{Name: "two", MachineType: "m", AutoScalerMax: 1}}
	c.Spec.RegistryCache = []operatorv1alpha1.RegistryCache{{Upstream: "quay.io"}}
	s, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	for _, w := range workers {
		if cri, _, _ := unstructured.NestedString(w.(map[string]any), "cri", "name"); cri != "containerd" {
			t.Errorf("worker %v: cri %q", w.(map[string]any)["name"], cri)
		}
	}
	if got := fmt.Sprint(extensionOf(s, RegistryCacheExtension)["providerConfig"]); got != "map[apiVersion:registry.extensions.gardener.cloud/v1alpha3 caches:[map[garbageCollection:map[ttl:168h0m0s] upstream:quay.io volume:map[size:10Gi]]] kind:RegistryConfig]" {
		t.Errorf("registry-cache providerConfig %s", got)
	}
	c.Spec.RegistryCache = nil
	s, _ = Desired(c, DefaultParams(), "b")
	if extensionOf(s, RegistryCacheExtension) != nil || strings.Contains(fmt.Sprint(s.Object), "containerd") {
		t.Error("without caches, the extension or a CRI is still rendered")
	}
}

// TestClusterExtensionsReplaceTheirTypeInSpecExtensions: registry caches and the ACL from
// their own fields replace an entry of their type in spec.extensions.
func TestClusterExtensionsReplaceTheirTypeInSpecExtensions(t *testing.T) {
	c := cluster("azure", "westeurope", 1)
	c.Spec.Extensions = &runtime.RawExtension{Raw: []byte(`[{"type":"acl","disabled":true},{"type":"shoot-networking-filter","disabled":true}]`)}
	c.Spec.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ACL: &operatorv1alpha1.APIServerACL{AllowedCIDRs: []operatorv1alpha1.CIDR{"203.0.113.0/24"}}}
	s, err := Desired(c, DefaultParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	if got := fmt.Sprint(list); got != "[map[disabled:true type:shoot-networking-filter] map[providerConfig:map[rule:map[action:ALLOW cidrs:[203.0.113.0/24] type:remote_ip]] type:acl]]" {
		t.Errorf("extensions %s", got)
	}
}

// TestTokenExpirationIsClampedToTheLandscape: the Cluster's maxTokenExpiration, or the
// landscape's, within the landscape's bounds (Gardener's by default); nothing without
// either.
func TestTokenExpirationIsClampedToTheLandscape(t *testing.T) {
	for _, tc := range []struct {
		cluster   string
		landscape ServiceAccountTokens
		want      string
	}{
		{"", ServiceAccountTokens{}, "<nil>"},
		{"", ServiceAccountTokens{MaxExpiration: "1000h"}, "1000h0m0s"},
		{"24h", ServiceAccountTokens{}, "720h0m0s"},
		{"4320h", ServiceAccountTokens{}, "2160h0m0s"},
		{"1500h", ServiceAccountTokens{MaxExpiration: "720h"}, "1500h0m0s"},
		{"2000h", ServiceAccountTokens{MaxExpirationMin: "800h", MaxExpirationMax: "1200h"}, "1200h0m0s"},
		{"1h", ServiceAccountTokens{MaxExpirationMin: "800h", MaxExpirationMax: "1200h"}, "800h0m0s"},
	} {
		c := cluster("aws", "eu-central-1", 1)
		if tc.cluster != "" {
			c.Spec.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ServiceAccountConfig: &operatorv1alpha1.ServiceAccountConfig{
				MaxTokenExpiration: ptr.To(operatorv1alpha1.Duration(tc.cluster))}}
		}
		p := DefaultParams()
		p.Landscape.ServiceAccountTokens = tc.landscape
		s, err := Desired(c, p, "b")
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedFieldNoCopy(s.Object, "spec", "kubernetes", "kubeAPIServer", "serviceAccountConfig", "maxTokenExpiration")
		if fmt.Sprint(got) != tc.want {
			t.Errorf("cluster %q, landscape %+v: maxTokenExpiration %v, want %s", tc.cluster, tc.landscape, got, tc.want)
		}
	}
}

// TestDualStack: IPv4 and IPv6 on aws (with the VPC's IPv6 and the load balancer
// controller) and gcp; refused elsewhere.
func TestDualStack(t *testing.T) {
	for provider, region := range map[string]string{"aws": "eu-central-1", "gcp": "europe-west3"} {
		c := cluster(provider, region, 1)
		c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{DualStack: true}
		s, err := Desired(c, DefaultParams(), "b")
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		if got := specField(s, "networking.ipFamilies"); got != "[IPv4 IPv6]" {
			t.Errorf("%s: ipFamilies %s", provider, got)
		}
		wantAWS := provider == "aws"
		if got := specField(s, "provider.infrastructureConfig.dualStack.enabled") == "true"; got != wantAWS {
			t.Errorf("%s: infrastructureConfig.dualStack.enabled %v", provider, got)
		}
		if got := specField(s, "provider.controlPlaneConfig.loadBalancerController.enabled") == "true"; got != wantAWS {
			t.Errorf("%s: controlPlaneConfig.loadBalancerController.enabled %v", provider, got)
		}
	}
}

// TestValidateFindsWhatTheSecondYearRefuses: every field of issue 41 that Gardener, an
// extension or the landscape would refuse is named, for a Cluster admission did not
// check (stored before the rules, or judged against the landscape).
func TestValidateFindsWhatTheSecondYearRefuses(t *testing.T) {
	cidrs := func(n int) []operatorv1alpha1.CIDR {
		out := make([]operatorv1alpha1.CIDR, n)
		for i := range out {
			out[i] = operatorv1alpha1.CIDR(fmt.Sprintf("203.0.113.%d/32", i))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		change func(*operatorv1alpha1.Cluster, *Params)
		want   []string
	}{
		{"pool names", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{
				{Name: "cpu-worker-0", MachineType: "m", AutoScalerMax: 1}, {Name: "a-name-far-too-long", MachineType: "m", AutoScalerMax: 1},
				{Name: "Bad_Name", MachineType: "m", AutoScalerMax: 1}, {Name: "b", MachineType: "m", AutoScalerMax: 1}, {Name: "b", AutoScalerMax: 1}}
		}, []string{`additionalWorkers[0].name "cpu-worker-0": two worker pools of one name`, `additionalWorkers[1].name "a-name-far-too-long": a DNS label of at most 15`,
			`additionalWorkers[2].name "Bad_Name"`, `additionalWorkers[4].name "b": two worker pools`, "additionalWorkers[4].machineType is required"}},
		{"pool sizes and zones", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{
				{Name: "a", MachineType: "m", AutoScalerMin: 3, AutoScalerMax: 2},
				{Name: "b", MachineType: "m", AutoScalerMax: 1, Zones: []string{"eu-central-1a", "eu-central-1b"}},
				{Name: "c", MachineType: "m", AutoScalerMax: 1, Zones: []string{"us-east-1a"}, Volume: &operatorv1alpha1.WorkerVolume{Size: "80G"}}}
		}, []string{"additionalWorkers[0].autoScalerMin 3 exceeds autoScalerMax 2", "additionalWorkers[1].autoScalerMax 1 is less than its 2 zones",
			`additionalWorkers[2].zones: "us-east-1a" is not one of the zones of eu-central-1`, `additionalWorkers[2].volume.size "80G"`}},
		{"dual stack on azure", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Provider, c.Spec.Core.Region = "azure", "westeurope"
			c.Spec.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{DualStack: true}
		}, []string{`dualStack: IPv4 and IPv6 are provisioned on aws and gcp only, not "azure"`}},
		{"ACL on gcp, CIDRs that do not parse", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.Infrastructure.Provider, c.Spec.Core.Region = "gcp", "europe-west3"
			c.Spec.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ACL: &operatorv1alpha1.APIServerACL{AllowedCIDRs: []operatorv1alpha1.CIDR{"10.0.0.0/33", "::ffff:10.0.0.0/104", "10.0.0.1"}}}
		}, []string{`acl: the API server's ACL is provisioned on aws and azure only, not "gcp"`, `allowedCIDRs[0] "10.0.0.0/33": not a CIDR`,
			`allowedCIDRs[1] "::ffff:10.0.0.0/104": an IPv4-mapped IPv6 address`, `allowedCIDRs[2] "10.0.0.1": not a CIDR`}},
		{"ACL over the extension's limit with the landscape's", func(c *operatorv1alpha1.Cluster, p *Params) {
			p.Landscape.ACL.OperatorCIDRs = []string{"198.51.100.7/32", "198.51.100.8/32"}
			c.Spec.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ACL: &operatorv1alpha1.APIServerACL{AllowedCIDRs: cidrs(49)}}
		}, []string{"allowedCIDRs: 51 with the landscape's 2 operator CIDRs, more than the acl extension's 50"}},
		{"versions", func(c *operatorv1alpha1.Cluster, _ *Params) { c.Spec.KubernetesVersion = "1.37" }, []string{"spec.kubernetesVersion 1.37: the garden's newest is 1.36"}},
		{"old version", func(c *operatorv1alpha1.Cluster, _ *Params) { c.Spec.KubernetesVersion = "1.31.4" }, []string{"spec.kubernetesVersion 1.31.4: Gardener provisions Kubernetes 1.32 and newer"}},
		{"version beyond a landscape's newest", func(c *operatorv1alpha1.Cluster, p *Params) {
			p.Landscape.Kubernetes.NewestVersion, c.Spec.KubernetesVersion = "1.34", "1.35"
		}, []string{"the garden's newest is 1.34"}},
		{"durations and registries", func(c *operatorv1alpha1.Cluster, _ *Params) {
			c.Spec.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ServiceAccountConfig: &operatorv1alpha1.ServiceAccountConfig{MaxTokenExpiration: ptr.To(operatorv1alpha1.Duration("30d"))}}
			c.Spec.RegistryCache = []operatorv1alpha1.RegistryCache{{Upstream: "https://docker.io"}, {Upstream: "quay.io", VolumeSize: "0Gi"},
				{Upstream: "quay.io", GarbageCollection: operatorv1alpha1.RegistryCacheGarbageCollection{TTL: "-1h"}}}
		}, []string{`maxTokenExpiration: "30d" is not a duration`, `registryCache[0].upstream "https://docker.io"`, `registryCache[1].volumeSize "0Gi"`,
			`registryCache[2].upstream "quay.io": cached twice`, `registryCache[2].garbageCollection.ttl: "-1h" is not a duration`}},
	} {
		t.Run(tc.name, func(t *testing.T) { assertInvalid(t, tc.change, tc.want) })
	}
}

// TestLandscapeValidateSecondYear: the landscape's ACL, token bounds and newest version
// are checked when the manager starts.
func TestLandscapeValidateSecondYear(t *testing.T) {
	l := Landscape{
		ACL:                  LandscapeACL{OperatorCIDRs: []string{"198.51.100.7"}},
		ServiceAccountTokens: ServiceAccountTokens{MaxExpiration: "100h", MaxExpirationMin: "2000h", MaxExpirationMax: "1000h"},
		Kubernetes:           LandscapeKubernetes{NewestVersion: "1.31"},
	}
	err := l.Validate()
	for _, want := range []string{
		`acl.operatorCIDRs[0] "198.51.100.7": not a CIDR`,
		"serviceAccountTokens.maxExpiration 100h: Gardener takes 720h to 2160h",
		"serviceAccountTokens: maxExpirationMin 2000h0m0s exceeds maxExpirationMax 1000h0m0s",
		"kubernetes.newestVersion 1.31: Gardener provisions Kubernetes 1.32 and newer",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nlacks %q", err, want)
		}
	}
	if err := (&Landscape{Kubernetes: LandscapeKubernetes{NewestVersion: "1.36.1"}}).Validate(); err == nil || !strings.Contains(err.Error(), "not a minor version") {
		t.Errorf("a patch version as the newest: %v", err)
	}
	p := DefaultParams()
	p.KubernetesVersion = "1.37"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "--shoot-kubernetes-version 1.37: the garden's newest is 1.36") {
		t.Errorf("--shoot-kubernetes-version above the newest: %v", err)
	}
}
