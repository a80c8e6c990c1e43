package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

// testParams are the operator's defaults with the test garden's project namespace.
func testParams() shoot.Params {
	p := shoot.DefaultParams()
	p.Namespace = projectNamespace
	return p
}

var regions = map[string]string{"aws": "eu-central-1", "azure": "westeurope", "gcp": "europe-west3", "openstack": "eu-de-1"}

// generatedShoot is the Shoot the Cluster operator writes for a production Cluster with
// three zones on provider, named name.
func generatedShoot(t *testing.T, provider, name string) *unstructured.Unstructured {
	t.Helper()
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "schema", Name: name},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Purpose: "production", Region: regions[provider]},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: provider, MachineType: "m", AutoScalerMin: 3, AutoScalerMax: 5, NumberOfZones: 3}}}
	s, err := shoot.Desired(c, testParams(), "binding-"+provider)
	if err != nil {
		t.Fatal(err)
	}
	s.SetName(name)
	return s
}

// TestGeneratedShootsAreAccepted: the Shoot generated for each provider passes the test
// garden's Gardener rules; one with OIDC (structured authentication) too.
func TestGeneratedShootsAreAccepted(t *testing.T) {
	for _, provider := range []string{"aws", "azure", "gcp", "openstack"} {
		s := generatedShoot(t, provider, "valid-"+provider)
		if err := mgmt.Client.Create(ctx, s, client.DryRunAll); err != nil {
			t.Errorf("%s: the generated shoot is refused: %v", provider, err)
		}
	}
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "schema", Name: "oidc"},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "europe-west3"},
			OIDCConfig:     &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "gcp", MachineType: "m", AutoScalerMax: 1}}}
	s, err := shoot.Desired(c, testParams(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Create(ctx, s, client.DryRunAll); err != nil {
		t.Errorf("a shoot with structured authentication is refused: %v", err)
	}
}

// TestShootRulesRefuseCounterExamples: each Gardener rule the test garden reproduces
// refuses a generated Shoot changed to break it, naming the problem; a change a real
// Gardener accepts is accepted.
func TestShootRulesRefuseCounterExamples(t *testing.T) {
	set := func(value any, path ...string) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			if err := unstructured.SetNestedField(s.Object, value, append([]string{"spec"}, path...)...); err != nil {
				t.Fatal(err)
			}
		}
	}
	unset := func(path ...string) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			unstructured.RemoveNestedField(s.Object, append([]string{"spec"}, path...)...)
		}
	}
	onWorker := func(change func(map[string]any)) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
			change(workers[0].(map[string]any))
			_ = unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers")
		}
	}
	onZone := func(i int, key string, value any) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			zones, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
			zones[i].(map[string]any)[key] = value
			_ = unstructured.SetNestedSlice(s.Object, zones, "spec", "provider", "infrastructureConfig", "networks", "zones")
		}
	}
	both := func(a, b func(*unstructured.Unstructured)) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) { a(s); b(s) }
	}
	for _, tc := range []struct {
		name, provider string
		change         func(*unstructured.Unstructured)
		want           string // "" : accepted
	}{
		{"region required", "aws", unset("region"), "spec.region: Required value"},
		{"credentialsBindingName required", "aws", unset("credentialsBindingName"), "credentialsBindingName must be set"},
		{"secretBindingName forbidden for >= 1.34", "aws", set("legacy", "secretBindingName"), "secretBindingName field is no longer supported"},
		{"oidcConfig forbidden for >= 1.32 (the default)", "aws", set(map[string]any{"clientID": "c"}, "kubernetes", "kubeAPIServer", "oidcConfig"), "oidcConfig field is no longer supported"},
		{"oidcConfig forbidden for 1.32", "aws", both(set("1.32.4", "kubernetes", "version"), set(map[string]any{"clientID": "c"}, "kubernetes", "kubeAPIServer", "oidcConfig")), "oidcConfig field is no longer supported"},
		{"oidcConfig allowed for 1.31", "aws", both(set("1.31.9", "kubernetes", "version"), set(map[string]any{"clientID": "c"}, "kubernetes", "kubeAPIServer", "oidcConfig")), ""},
		{"oidcConfig and structuredAuthentication exclusive", "aws", both(set("1.31.9", "kubernetes", "version"), set(map[string]any{"oidcConfig": map[string]any{"clientID": "c"}, "structuredAuthentication": map[string]any{"configMapName": "x"}}, "kubernetes", "kubeAPIServer")), "incompatible with structuredAuthentication"},
		{"structuredAuthentication names a ConfigMap", "aws", set(map[string]any{"configMapName": ""}, "kubernetes", "kubeAPIServer", "structuredAuthentication"), "configMapName"},
		{"purpose", "aws", set("Production", "purpose"), `spec.purpose: Unsupported value: "Production"`},
		{"failure tolerance type", "aws", set("region", "controlPlane", "highAvailability", "failureTolerance", "type"), "failureTolerance.type: Unsupported value"},
		{"maintenance window too short", "aws", set(map[string]any{"begin": "220000+0000", "end": "221000+0000"}, "maintenance", "timeWindow"), "30 minutes to 6 hours"},
		{"maintenance window format", "aws", set(map[string]any{"begin": "22:00", "end": "23:00"}, "maintenance", "timeWindow"), "timeWindow.begin"},
		{"duplicate extensions", "aws", set([]any{map[string]any{"type": "a"}, map[string]any{"type": "a"}}, "extensions"), "Duplicate value"},
		{"networking type required", "aws", unset("networking", "type"), "spec.networking.type: Required value"},
		{"nodes required", "aws", unset("networking", "nodes"), "a nodes CIDR must be provided"},
		{"nodes a CIDR", "aws", set("10.250.0.0/33", "networking", "nodes"), "networking.nodes must be a canonical IPv4 CIDR"},
		{"nodes canonical", "aws", set("10.250.0.1/16", "networking", "nodes"), "networking.nodes must be a canonical IPv4 CIDR"},
		{"pods apart from nodes", "aws", set("10.250.128.0/17", "networking", "pods"), "nodes, pods and services must not overlap"},
		{"infrastructureConfig required", "aws", unset("provider", "infrastructureConfig"), "InfrastructureConfig must be set"},
		{"infrastructureConfig of the provider", "aws", set("gcp.provider.extensions.gardener.cloud/v1alpha1", "provider", "infrastructureConfig", "apiVersion"), "must be an InfrastructureConfig of"},
		{"aws vpc cidr or id", "aws", unset("provider", "infrastructureConfig", "networks", "vpc", "cidr"), "either a vpc cidr or a vpc id"},
		{"aws vpc contains nodes", "aws", set("10.250.0.0/17", "provider", "infrastructureConfig", "networks", "vpc", "cidr"), "the VPC CIDR must contain networking.nodes"},
		{"aws vpc apart from services", "aws", both(set("100.104.0.0/13", "provider", "infrastructureConfig", "networks", "vpc", "cidr"), set("100.104.0.0/16", "networking", "nodes")), "must not overlap networking.pods or networking.services"},
		{"aws zones required", "aws", set([]any{}, "provider", "infrastructureConfig", "networks", "zones"), "aws needs zones"},
		{"aws zone CIDR canonical", "aws", onZone(0, "workers", "10.250.0.1/19"), "must be a valid canonical CIDR"},
		{"aws zone inside the VPC", "aws", onZone(1, "internal", "10.251.112.0/20"), "every zone CIDR must lie inside the VPC CIDR"},
		{"aws zone workers inside the nodes", "aws", both(set("10.0.0.0/8", "provider", "infrastructureConfig", "networks", "vpc", "cidr"), onZone(2, "workers", "10.9.0.0/19")), "every zone's workers CIDR must lie inside networking.nodes"},
		{"aws zones apart", "aws", onZone(1, "public", "10.250.0.0/20"), "no two zone CIDRs may overlap"},
		{"aws worker zones configured", "aws", onWorker(func(w map[string]any) { w["zones"] = []any{"eu-central-1a", "eu-central-1b", "eu-central-1d"} }), "every worker zone must be a zone of"},
		{"maximum >= zones", "aws", onWorker(func(w map[string]any) { w["minimum"], w["maximum"] = int64(1), int64(2) }), "maximum node count should be greater than or equal to the number of zones"},
		{"maximum >= minimum", "aws", onWorker(func(w map[string]any) { w["minimum"] = int64(9) }), "maximum value must not be less than minimum value"},
		{"maxSurge and maxUnavailable not both 0", "aws", onWorker(func(w map[string]any) { w["maxSurge"] = int64(0) }), "may not be 0 when `maxSurge` is 0"},
		{"worker name length", "aws", onWorker(func(w map[string]any) { w["name"] = "a-very-long-worker-name" }), "spec.provider.workers[0].name: Too long"},
		{"machine type required", "aws", onWorker(func(w map[string]any) { delete(w["machine"].(map[string]any), "type") }), "machine.type: Required value"},
		{"aws volume required", "aws", onWorker(func(w map[string]any) { delete(w, "volume") }), "need a volume with type and size"},
		{"volume size format", "aws", onWorker(func(w map[string]any) { w["volume"].(map[string]any)["size"] = "80GB" }), "volume.size: Invalid value"},
		{"zones unique", "aws", onWorker(func(w map[string]any) { w["zones"] = []any{"eu-central-1a", "eu-central-1a", "eu-central-1b"} }), "only be specified once"},
		{"azure infrastructureConfig required", "azure", unset("provider", "infrastructureConfig"), "InfrastructureConfig must be set"},
		{"azure zones only when zoned", "azure", set(false, "provider", "infrastructureConfig", "zoned"), "zones only when zoned"},
		{"azure workers or zones", "azure", set("10.250.0.0/16", "provider", "infrastructureConfig", "networks", "workers"), "either workers or zones (not both)"},
		{"azure zone inside the VNet", "azure", onZone(2, "cidr", "10.251.64.0/19"), "every zone CIDR must lie inside the VNet CIDR"},
		{"azure zones apart", "azure", onZone(1, "cidr", "10.250.0.0/19"), "no two may overlap"},
		{"azure NAT timeout", "azure", onZone(0, "natGateway", map[string]any{"enabled": true, "idleConnectionTimeoutMinutes": int64(121)}), "idleConnectionTimeoutMinutes"},
		{"azure volume required", "azure", onWorker(func(w map[string]any) { delete(w, "volume") }), "need a volume with type and size"},
		{"gcp controlPlaneConfig required", "gcp", unset("provider", "controlPlaneConfig"), "controlPlaneConfig must be set"},
		{"gcp controlPlaneConfig of the provider", "gcp", set("ControlPlaneCfg", "provider", "controlPlaneConfig", "kind"), "must be a ControlPlaneConfig of"},
		{"gcp control plane zone a worker zone", "gcp", set("europe-west3-x", "provider", "controlPlaneConfig", "zone"), "must be the name of a zone of at least one worker"},
		{"gcp workers network required", "gcp", unset("provider", "infrastructureConfig", "networks", "workers"), "must specify the network range for the worker network"},
		{"gcp workers network inside the nodes", "gcp", set("10.251.0.0/16", "provider", "infrastructureConfig", "networks", "workers"), "networks.workers must lie inside networking.nodes"},
		{"gcp volume required", "gcp", onWorker(func(w map[string]any) { delete(w, "volume") }), "need a volume with type and size"},
		{"gcp no scratch boot disk", "gcp", onWorker(func(w map[string]any) { w["volume"].(map[string]any)["type"] = "SCRATCH" }), "SCRATCH is not allowed as boot disk"},
		{"openstack controlPlaneConfig required", "openstack", unset("provider", "controlPlaneConfig"), "controlPlaneConfig must be set"},
		{"openstack load balancer provider", "openstack", unset("provider", "controlPlaneConfig", "loadBalancerProvider"), "must provide the name of a load balancer provider"},
		{"openstack floating pool", "openstack", unset("provider", "infrastructureConfig", "floatingPoolName"), "openstack needs a floatingPoolName"},
		{"openstack workers network", "openstack", unset("provider", "infrastructureConfig", "networks", "workers"), "openstack needs a floatingPoolName and networks.workers"},
		{"openstack no volume is fine", "openstack", onWorker(func(w map[string]any) { delete(w, "volume") }), ""},
		{"openstack volume type needs a size", "openstack", onWorker(func(w map[string]any) { w["volume"] = map[string]any{"type": "ssd"} }), "volume.size: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := generatedShoot(t, tc.provider, "rule")
			tc.change(s)
			checkAnswer(t, mgmt.Client.Create(ctx, s, client.DryRunAll), tc.want)
		})
	}
}

// TestShootUpdateRules: what Gardener forbids to change on an existing Shoot is refused,
// what it allows (another zone) is accepted.
func TestShootUpdateRules(t *testing.T) {
	base := generatedShoot(t, "aws", "update-rules")
	twoZones := func(s *unstructured.Unstructured) {
		workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
		w := workers[0].(map[string]any)
		w["zones"] = w["zones"].([]any)[:2]
		w["maxSurge"] = int64(2)
		_ = unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers")
		zones, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
		_ = unstructured.SetNestedSlice(s.Object, zones[:2], "spec", "provider", "infrastructureConfig", "networks", "zones")
	}
	twoZones(base)
	if err := mgmt.Client.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, base) })
	for _, tc := range []struct {
		name   string
		change func(*unstructured.Unstructured)
		want   string
	}{
		{"a third zone", func(s *unstructured.Unstructured) {
			three := generatedShoot(t, "aws", "update-rules")
			s.Object["spec"] = three.Object["spec"]
		}, ""},
		{"region", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "eu-west-1", "spec", "region")
		}, "region: field is immutable"},
		{"provider type", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "alicloud", "spec", "provider", "type")
		}, "provider.type: field is immutable"},
		{"nodes", func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "10.0.0.0/16", "spec", "networking", "nodes")
		}, "networking.nodes: field is immutable"},
		{"a zone removed", func(s *unstructured.Unstructured) {
			workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
			w := workers[0].(map[string]any)
			w["zones"], w["maxSurge"] = w["zones"].([]any)[1:], int64(1)
			_ = unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers")
			zones, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
			_ = unstructured.SetNestedSlice(s.Object, zones[1:], "spec", "provider", "infrastructureConfig", "networks", "zones")
		}, "zones can only be appended"},
		{"a zone's subnets", func(s *unstructured.Unstructured) {
			zones, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
			zones[0].(map[string]any)["internal"] = "10.250.224.0/20"
			_ = unstructured.SetNestedSlice(s.Object, zones, "spec", "provider", "infrastructureConfig", "networks", "zones")
		}, "the VPC CIDR and zone CIDRs are immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkUpdate(t, base.GetName(), tc.change, tc.want) })
	}
}

// TestUngardenableClusterStalls: a Cluster Gardener would refuse is Stalled with every
// problem named, before anything is asked of the pool or the garden.
func TestUngardenableClusterStalls(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "aws-shared-9", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true"})
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ungardenable"},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "eu-central-1"},
			OIDCConfig: &operatorv1alpha1.OIDCConfig{ClientID: "asdf", IssuerURL: "asdf"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "aws", MachineType: "m5.large", AutoScalerMin: 1, AutoScalerMax: 2, NumberOfZones: 3,
				Networking: &operatorv1alpha1.ClusterNetworking{Nodes: "10.250.0.1/16", Pods: "100.64.0.0/12", Services: "100.64.0.0/13"}}}}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	cond := waitCondition(t, c.Name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInvalidSpec)
	for _, want := range []string{"autoScalerMax 2 is less than numberOfZones 3", `nodes "10.250.0.1/16": not canonical`,
		"pods 100.64.0.0/12 overlaps services 100.64.0.0/13", `issuerURL "asdf" must be an https URL`} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q lacks %q", cond.Message, want)
		}
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name}, &cp.SubscriptionRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("an ungardenable Cluster requested a credential: %v", err)
	}
	if _, err := getShoot(shoot.Name(ns, c.Name)); !apierrors.IsNotFound(err) {
		t.Errorf("an ungardenable Cluster got a shoot: %v", err)
	}
}

// authConfigMap is the structured-authentication ConfigMap of a Cluster's shoot.
func authConfigMap(clusterName string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, mgmt.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace,
		Name: shoot.AuthenticationConfigMapName(shoot.Name(ns, clusterName))}, cm)
}

// TestOIDCThroughStructuredAuthentication: a Cluster's OIDC reaches the shoot as a
// ConfigMap beside it (the front refuses a Shoot naming a missing one, as Gardener does),
// owned by the Shoot; a new issuer changes both, no OIDC removes the ConfigMap, and
// deleting the Cluster removes it with the Shoot. A Cluster spec change that Gardener
// would refuse on the existing Shoot stalls and leaves the Shoot alone.
func TestOIDCThroughStructuredAuthentication(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-9", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "oidc"
	c := gcpCluster(name, "europe-west3")
	c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://one.example", UsernameClaim: "email"}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	s, err := getShoot(shoot.Name(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := authConfigMap(name)
	if err != nil {
		t.Fatalf("the authentication ConfigMap: %v", err)
	}
	if got, _, _ := unstructured.NestedString(s.Object, "spec", "kubernetes", "kubeAPIServer", "structuredAuthentication", "configMapName"); got != cm.Name {
		t.Errorf("the shoot names %q, want %q", got, cm.Name)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != s.GetUID() || cm.OwnerReferences[0].Kind != "Shoot" {
		t.Errorf("ConfigMap owners %v, want the shoot %s", cm.OwnerReferences, s.GetUID())
	}
	if !strings.Contains(cm.Data[shoot.AuthenticationConfigKey], "url: https://one.example") {
		t.Errorf("ConfigMap data %q", cm.Data)
	}
	hash := s.GetAnnotations()["cluster.trustplane.io/authentication-config-hash"]

	// A new issuer: the ConfigMap follows, and the Shoot changes with it (so Gardener
	// reconciles the shoot's API server).
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.OIDCConfig.IssuerURL = "https://two.example" })
	testenv.Eventually(t, "the ConfigMap and the shoot to follow the new issuer", 30*time.Second, func() bool {
		cm, err := authConfigMap(name)
		s, err2 := getShoot(shoot.Name(ns, name))
		return err == nil && err2 == nil && strings.Contains(cm.Data[shoot.AuthenticationConfigKey], "https://two.example") &&
			s.GetAnnotations()["cluster.trustplane.io/authentication-config-hash"] != hash
	})

	// A change Gardener forbids on the existing shoot: stalled, named, the shoot unchanged.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Core.Region = "europe-west4" })
	cond := waitCondition(t, name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInvalidSpec)
	if !strings.Contains(cond.Message, `spec.region cannot change from "europe-west3" to "europe-west4"`) {
		t.Errorf("message %q", cond.Message)
	}
	if s, _ := getShoot(shoot.Name(ns, name)); s.Object["spec"].(map[string]any)["region"] != "europe-west3" {
		t.Error("the shoot's region changed")
	}
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Core.Region = "europe-west3" })

	// No OIDC any more: the Shoot stops naming the ConfigMap, which goes.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.OIDCConfig = nil })
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	testenv.Eventually(t, "the ConfigMap to go with the OIDC setting", 30*time.Second, func() bool {
		_, err := authConfigMap(name)
		return apierrors.IsNotFound(err)
	})
	if s, _ := getShoot(shoot.Name(ns, name)); fmt.Sprint(s.Object["spec"].(map[string]any)["kubernetes"]) != "<nil>" {
		t.Errorf("the shoot still has %v", s.Object["spec"].(map[string]any)["kubernetes"])
	}

	// OIDC again, then the Cluster goes: the ConfigMap goes with the Shoot.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) {
		c.Spec.OIDCConfig = &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://three.example"}
	})
	testenv.Eventually(t, "the ConfigMap back", 30*time.Second, func() bool { _, err := authConfigMap(name); return err == nil })
	if err := mgmt.Client.Delete(ctx, getCluster(t, name)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster to go", 30*time.Second, gone(mgmt.Client, c))
	if _, err := authConfigMap(name); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap after the Cluster went: %v", err)
	}
}

// checkUpdate dry-runs change on the live Shoot name and checks the answer: accepted when
// want is "", else Invalid naming want. The test gardener writes the Shoot too (its
// finalizer, its status): a conflict only means the read was older than that write.
func checkUpdate(t *testing.T, name string, change func(*unstructured.Unstructured), want string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := getShoot(name)
		if err != nil {
			return err
		}
		change(live)
		return mgmt.Client.Update(ctx, live, client.DryRunAll)
	})
	checkAnswer(t, err, want)
}

// checkAnswer checks the garden's answer to a write: accepted when want is "", else
// Invalid naming want.
func checkAnswer(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want)):
		t.Errorf("got %v; want Invalid naming %q", err, want)
	}
}
