package shoot

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

func cluster(provider, region string, zones int32) *operatorv1alpha1.Cluster {
	return &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "kcp", Name: "c1", Labels: map[string]string{"plan": "azure", "unrelated": "x"}},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: region},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: provider, MachineType: "Standard_D4", AutoScalerMin: 2, AutoScalerMax: 4, NumberOfZones: zones}}}
}

func TestZonesPerProvider(t *testing.T) {
	for _, tc := range []struct {
		provider, region string
		n                int
		want             string
	}{
		{"aws", "eu-central-1", 3, "[eu-central-1a eu-central-1b eu-central-1c]"},
		{"gcp", "europe-west3", 2, "[europe-west3-a europe-west3-b]"},
		{"azure", "westeurope", 3, "[1 2 3]"},
		{"openstack", "eu-de-1", 3, "[eu-de-1a eu-de-1b eu-de-1d]"},
	} {
		got, err := Zones(tc.provider, tc.region, tc.n)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Zones(%s, %s, %d) = %v, %v; want %s", tc.provider, tc.region, tc.n, got, err, tc.want)
		}
	}
	if _, err := Zones("aws", "eu-central-1", 4); err == nil || !strings.Contains(err.Error(), "3 zones") {
		t.Errorf("four aws zones: %v", err)
	}
	if _, err := Zones("alicloud", "x", 1); err == nil {
		t.Error("an unknown provider has zones")
	}
}

func TestDesiredAzureShoot(t *testing.T) {
	c := cluster("azure", "westeurope", 2)
	got, err := Desired(c, DefaultParams(), "az-binding")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"metadata.namespace":          "garden-kyma",
		"metadata.name":               Name("kcp", "c1"),
		"metadata.labels.plan":        "azure",
		"spec.cloudProfile.name":      "az",
		"spec.provider.type":          "azure",
		"spec.purpose":                "development",
		"spec.credentialsBindingName": "az-binding",
		"spec.networking.nodes":       "10.250.0.0/16",
	} {
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, strings.Split(path, ".")...); v != want {
			t.Errorf("%s = %v, want %v", path, v, want)
		}
	}
	if got.GetLabels()[operatorv1alpha1.ClusterNameLabel] != "c1" || got.GetLabels()[operatorv1alpha1.ClusterNamespaceLabel] != "kcp" {
		t.Errorf("labels %v do not name the Cluster", got.GetLabels())
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "metadata", "labels", "unrelated"); found {
		t.Error("a label outside plan/globalaccountid/subaccountid/instanceid was copied")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "kubernetes"); found {
		t.Error("spec.kubernetes set without OIDC or a pinned version")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "controlPlane"); found {
		t.Error("a development shoot asks for a highly available control plane")
	}
	workers, _, _ := unstructured.NestedSlice(got.Object, "spec", "provider", "workers")
	if w := workers[0].(map[string]any); fmt.Sprint(w["zones"]) != "[1 2]" || w["maxSurge"] != int64(2) {
		t.Errorf("worker %v", w)
	}
	if got.GroupVersionKind() != GVK {
		t.Errorf("kind %v", got.GroupVersionKind())
	}
}

// Shoot names fit Gardener's limit with a project name of up to 6 characters, are DNS
// labels starting with a letter, are stable, and use their whole alphabet: 36^14 × 26
// names (77 bits). The input is unambiguous: "a-b"/"c" and "a"/"b-c" differ.
func TestNamesCarry77BitsAndFitGardensLimit(t *testing.T) {
	seen := map[string]bool{}
	used := map[byte]bool{}
	for i := range 2000 {
		name := Name("ns", fmt.Sprintf("cluster-%d", i))
		if len(name) != NameLength || 6+len(name) > 21 || !regexp.MustCompile(`^[a-z][a-z0-9]{14}$`).MatchString(name) {
			t.Fatalf("name %q: want a letter and 14 of [a-z0-9]", name)
		}
		if seen[name] {
			t.Fatalf("name %q twice", name)
		}
		seen[name] = true
		for j := 1; j < len(name); j++ {
			used[name[j]] = true
		}
	}
	if len(used) != 36 {
		t.Errorf("the names use %d of 36 characters after the first", len(used))
	}
	if again := Name("ns", "cluster-0"); Name("a-b", "c") == Name("a", "b-c") || !seen[again] {
		t.Error("names are ambiguous or unstable")
	}
	if bits := NameBits(NameLength); bits < 75 || bits != math.Log2(26)+14*math.Log2(36) {
		t.Errorf("%.1f bits", bits)
	}
}

// A Cluster provisioned under its legacy name keeps it; any other status, forged or
// not, gets the Cluster's own new name, cut to what the project's name leaves.
func TestNameOfKeepsALegacyShootAndFitsTheProject(t *testing.T) {
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"}}
	legacy := LegacyName("ns", "prod")
	if !regexp.MustCompile(`^c-[0-9a-f]{7}$`).MatchString(legacy) {
		t.Fatalf("legacy name %q", legacy)
	}
	p := Params{Namespace: "garden-kyma"}
	for status, want := range map[string]string{"": Name("ns", "prod"), legacy: legacy, LegacyName("ns", "other"): Name("ns", "prod"), Name("ns", "other"): Name("ns", "prod")} {
		c.Status.ShootName = status
		if got := p.NameOf(c); got != want {
			t.Errorf("status.shootName %q: NameOf = %q, want %q", status, got, want)
		}
	}
	c.Status.ShootName = ""
	for namespace, length := range map[string]int{"garden-kyma": 15, "garden-kyma42": 15, "garden-kyma-dev": 13, "garden-kyma-stage": 11, "projectless": 10} {
		p := Params{Namespace: namespace}
		name := p.NameOf(c)
		if len(name) != length || len(p.Project())+len(name) > 21 || !strings.HasPrefix(Name("ns", "prod"), name) {
			t.Errorf("project namespace %s: shoot name %q, want the first %d characters of %q", namespace, name, length, Name("ns", "prod"))
		}
	}
	if bits := NameBits(13); bits < 66 || bits > 67 {
		t.Errorf("13 characters carry %.1f bits", bits)
	}
}

// A project name that leaves no room for a Shoot name as long as the legacy one is
// refused at start-up, naming the flag.
func TestAProjectNameTooLongIsRefused(t *testing.T) {
	p := DefaultParams()
	p.Namespace = "garden-a-very-long-project"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "--garden-namespace garden-a-very-long-project") {
		t.Errorf("Validate: %v", err)
	}
	p.Namespace = "garden-twelve-chars"
	if err := p.Validate(); err != nil {
		t.Errorf("a 12-character project: %v", err)
	}
}

func TestExtensions(t *testing.T) {
	for _, tc := range []struct{ raw, want, err string }{
		{`{"shootNetworkingFilterDisabled":true,"shootDnsServiceDisabled":false}`, "[map[disabled:false type:shoot-dns-service] map[disabled:true type:shoot-networking-filter]]", ""},
		{`[{"type":"shoot-cert-service","providerConfig":{"a":1}}]`, "[map[providerConfig:map[a:1] type:shoot-cert-service]]", ""},
		{`{"shootNetworkingFilter":true}`, "", "only <extension>Disabled"},
		{`{"shootNetworkingFilterDisabled":"yes"}`, "", "only <extension>Disabled"},
		{`[{"providerConfig":{}}]`, "", "needs a type"},
		{`"text"`, "", "must be a list"},
	} {
		spec := operatorv1alpha1.ClusterSpec{Extensions: &runtime.RawExtension{Raw: []byte(tc.raw)}}
		got, err := extensions(spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v, %v; want %s", tc.raw, got, err, tc.want)
		}
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	err := Validate(operatorv1alpha1.ClusterSpec{Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "alicloud"}}, DefaultParams())
	for _, want := range []string{"provider \"alicloud\"", "region is required", "machineType is required", "autoScalerMax is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to mention %s", err, want)
		}
	}
	if err := Validate(cluster("gcp", "europe-west3", 1).Spec, DefaultParams()); err != nil {
		t.Errorf("a complete spec: %v", err)
	}
}

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		opType, state string
		phase         Phase
		provisioned   bool
	}{
		{"", "", PhasePending, false},
		{"Create", "Processing", PhaseRunning, false},
		{"Create", "Succeeded", PhaseSucceeded, true},
		{"Create", "Error", PhaseError, false},
		{"Create", "Failed", PhaseFailed, false},
		{"Reconcile", "Processing", PhaseRunning, true},
		{"Reconcile", "Error", PhaseError, true},
		{"Delete", "Processing", PhaseDeleting, false},
	} {
		s := &unstructured.Unstructured{Object: map[string]any{}}
		if tc.opType != "" {
			_ = unstructured.SetNestedMap(s.Object, map[string]any{"type": tc.opType, "state": tc.state, "progress": int64(40)}, "status", "lastOperation")
		}
		p := ProgressOf(s)
		if p.Phase != tc.phase || p.Provisioned() != tc.provisioned {
			t.Errorf("%s/%s: phase %s provisioned %v; want %s %v", tc.opType, tc.state, p.Phase, p.Provisioned(), tc.phase, tc.provisioned)
		}
		if tc.opType != "" && !strings.Contains(p.Message(), "(40%)") {
			t.Errorf("message %q", p.Message())
		}
	}
}
