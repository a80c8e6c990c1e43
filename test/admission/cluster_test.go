package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

// crdOf is the CRD of kind as the project ships it.
func crdOf(t *testing.T, kind string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Spec.Names.Kind == kind {
			return crd
		}
	}
	t.Fatalf("no %s CRD", kind)
	return nil
}

// TestClusterSecondYearRefusedNamingTheField: what issue 41's bad input names is refused
// when the Cluster is written, naming the field: worker pool names that collide or break
// Gardener's name rules, a CIDR that does not parse, dual stack or an ACL on a provider
// that lacks it, a Kubernetes version Gardener does not provision, and the registry
// cache's values.
func TestClusterSecondYearRefusedNamingTheField(t *testing.T) {
	crd := crdOf(t, "Cluster")
	pool := func(name string) map[string]any {
		return map[string]any{"name": name, "machineType": "m", "autoScalerMin": int64(0), "autoScalerMax": int64(1)}
	}
	for _, tc := range []struct {
		name   string
		change func(spec map[string]any)
		want   string
	}{
		{"the main pool's name", func(s map[string]any) { infra(s)["additionalWorkers"] = []any{pool("cpu-worker-0")} },
			"spec.infrastructure.additionalWorkers[0].name: Invalid value: \"cpu-worker-0\": cpu-worker-0 is the main worker pool"},
		{"two pools of one name", func(s map[string]any) { infra(s)["additionalWorkers"] = []any{pool("gpu"), pool("gpu")} },
			"spec.infrastructure.additionalWorkers[1]: Duplicate value"},
		{"a pool name over 15", func(s map[string]any) { infra(s)["additionalWorkers"] = []any{pool("a-name-too-long-")} },
			"spec.infrastructure.additionalWorkers[0].name: Too long"},
		{"a pool name not a DNS label", func(s map[string]any) { infra(s)["additionalWorkers"] = []any{pool("GPU_pool")} },
			"spec.infrastructure.additionalWorkers[0].name: Invalid value: \"GPU_pool\""},
		{"fewer nodes than zones", func(s map[string]any) {
			p := pool("gpu")
			p["zones"] = []any{"eu-west-1a", "eu-west-1b"}
			infra(s)["additionalWorkers"] = []any{p}
		}, "spec.infrastructure.additionalWorkers[0]: Invalid value: autoScalerMax must be at least the number of zones"},
		{"a label key", func(s map[string]any) {
			p := pool("gpu")
			p["labels"] = map[string]any{"not a key": "x"}
			infra(s)["additionalWorkers"] = []any{p}
		}, "spec.infrastructure.additionalWorkers[0].labels: Invalid value: label keys are [prefix/]name"},
		{"a taint effect", func(s map[string]any) {
			p := pool("gpu")
			p["taints"] = []any{map[string]any{"key": "gpu", "effect": "Sometimes"}}
			infra(s)["additionalWorkers"] = []any{p}
		}, "spec.infrastructure.additionalWorkers[0].taints[0].effect: Unsupported value: \"Sometimes\""},
		{"a CIDR that does not parse", func(s map[string]any) {
			s["kubeAPIServer"].(map[string]any)["acl"] = map[string]any{"allowedCIDRs": []any{"10.0.0.0/33"}}
		}, "spec.kubeAPIServer.acl.allowedCIDRs[0]: Invalid value: \"10.0.0.0/33\": must be a CIDR such as 203.0.113.0/24"},
		{"dual stack on azure", func(s map[string]any) {
			infra(s)["provider"] = "azure"
			delete(s, "kubeAPIServer")
		}, "spec.infrastructure.networking.dualStack needs spec.infrastructure.provider aws or gcp"},
		{"an ACL on gcp", func(s map[string]any) { infra(s)["provider"] = "gcp" },
			"spec.kubeAPIServer.acl needs spec.infrastructure.provider aws or azure"},
		{"a version before 1.32", func(s map[string]any) { s["kubernetesVersion"] = "1.31.9" },
			"spec.kubernetesVersion: Invalid value: \"1.31.9\": Gardener provisions Kubernetes 1.32 and newer"},
		{"a version not one", func(s map[string]any) { s["kubernetesVersion"] = "v1.35" }, "spec.kubernetesVersion: Invalid value: \"v1.35\""},
		{"an upstream with a scheme", func(s map[string]any) { cache(s)["upstream"] = "https://docker.io" }, "spec.registryCache[0].upstream: Invalid value: \"https://docker.io\""},
		{"an upstream twice", func(s map[string]any) { s["registryCache"] = []any{cache(s), cache(s)} }, "spec.registryCache[1]: Duplicate value"},
		{"a volume of 0", func(s map[string]any) { cache(s)["volumeSize"] = "0Gi" }, "spec.registryCache[0].volumeSize: Invalid value: \"0Gi\""},
		{"a ttl in days", func(s map[string]any) { cache(s)["garbageCollection"] = map[string]any{"ttl": "7d"} }, "spec.registryCache[0].garbageCollection.ttl: Invalid value: \"7d\": must be a duration such as 720h"},
		{"a token lifetime in days", func(s map[string]any) {
			s["kubeAPIServer"].(map[string]any)["serviceAccountConfig"] = map[string]any{"maxTokenExpiration": "30d"}
		}, "spec.kubeAPIServer.serviceAccountConfig.maxTokenExpiration: Invalid value: \"30d\": must be a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := deepCopy(baselines["Cluster"])
			tc.change(spec)
			_, err := submit(crd, "v1alpha1", spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant a refusal containing %q", err, tc.want)
			}
		})
	}
}

func infra(spec map[string]any) map[string]any { return spec["infrastructure"].(map[string]any) }

func cache(spec map[string]any) map[string]any {
	return spec["registryCache"].([]any)[0].(map[string]any)
}

// TestRegistryCacheUpdatesRefusedAsTheExtensionRefusesThem: a cache's volume size cannot
// change, and garbage collection once off cannot come back on
// (gardener-extension-registry-cache ValidateRegistryConfigUpdate); removing the cache and
// adding another is accepted.
func TestRegistryCacheUpdatesRefusedAsTheExtensionRefusesThem(t *testing.T) {
	ctx := context.Background()
	c := &unstructured.Unstructured{Object: map[string]any{"spec": deepCopy(baselines["Cluster"])}}
	c.SetAPIVersion(operatorv1alpha1.GroupVersion.String())
	c.SetKind("Cluster")
	c.SetNamespace(namespace)
	c.SetName("registry-cache-updates")
	cache(c.Object["spec"].(map[string]any))["garbageCollection"] = map[string]any{"ttl": "0s"}
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, c) })
	for _, tc := range []struct {
		name   string
		change func(spec map[string]any)
		want   string
	}{
		{"volume size", func(s map[string]any) { cache(s)["volumeSize"] = "20Gi" }, "volumeSize cannot change once the cache exists"},
		{"garbage collection back on", func(s map[string]any) { cache(s)["garbageCollection"] = map[string]any{"ttl": "24h"} },
			"garbage collection cannot be turned back on once its ttl was 0"},
		{"another cache instead", func(s map[string]any) {
			s["registryCache"] = []any{map[string]any{"upstream": "quay.io", "volumeSize": "20Gi"}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(c.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
				t.Fatal(err)
			}
			tc.change(live.Object["spec"].(map[string]any))
			err := env.Client.Update(ctx, live, client.DryRunAll)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}

// TestACLCIDRsAdmittedAsTheCodeReadsThem: the API server admits an allowed CIDR exactly
// when the Cluster operator reads it (shoot.Validate), so no ACL is stored that the
// operator would stall on; every refusal names the field.
func TestACLCIDRsAdmittedAsTheCodeReadsThem(t *testing.T) {
	crd := crdOf(t, "Cluster")
	for _, cidr := range []string{"203.0.113.0/24", "203.0.113.7/24", "0.0.0.0/0", "2001:db8::/32", "::/0", "10.0.0.1/32",
		"10.0.0.0/33", "10.0.0.0", "010.0.0.0/8", "::ffff:10.0.0.0/104", "fe80::1%eth0/64", "10.0.0.0/-1", " 10.0.0.0/8", "2001:db8::/129"} {
		spec := deepCopy(baselines["Cluster"])
		spec["kubeAPIServer"].(map[string]any)["acl"] = map[string]any{"allowedCIDRs": []any{cidr}}
		_, admitErr := submit(crd, "v1alpha1", spec)
		c := operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "eu-west-1"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "aws", MachineType: "m", AutoScalerMax: 1},
			KubeAPIServer:  &operatorv1alpha1.KubeAPIServer{ACL: &operatorv1alpha1.APIServerACL{AllowedCIDRs: []operatorv1alpha1.CIDR{operatorv1alpha1.CIDR(cidr)}}}}
		readErr := shoot.Validate(c, shoot.DefaultParams())
		var invalid *shoot.InvalidError
		readsIt := !errors.As(readErr, &invalid) || !strings.Contains(readErr.Error(), "allowedCIDRs")
		switch {
		case admitErr == nil && !readsIt:
			t.Errorf("%q admitted, but the operator refuses it: %v", cidr, readErr)
		case admitErr != nil && readsIt:
			t.Errorf("%q refused, but the operator reads it: %v", cidr, admitErr)
		case admitErr != nil && !strings.Contains(admitErr.Error(), "spec.kubeAPIServer.acl.allowedCIDRs[0]"):
			t.Errorf("%q refused without naming the field: %v", cidr, admitErr)
		}
	}
}

// TestClusterVersionsPolicy: with config/policy/cluster-versions.yaml installed, a
// Cluster's spec.kubernetesVersion above the newest the manager published
// (trustplane-landscape in trustplane-system) is refused when set, naming the field; a
// Cluster that keeps its version is not judged again; the newest moves with the
// ConfigMap, and without it every version passes (the operator stalls those above).
func TestClusterVersionsPolicy(t *testing.T) {
	ctx := context.Background()
	objs, err := config.Policies()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetName() != "trustplane-cluster-versions" {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trustplane-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	param := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "trustplane-system", Name: operatorv1alpha1.LandscapeConfigMap},
		Data: map[string]string{operatorv1alpha1.LandscapeNewestKubernetesVersionKey: "1.36"}}
	if err := env.Client.Create(ctx, param); err != nil {
		t.Fatal(err)
	}
	crd := crdOf(t, "Cluster")
	withVersion := func(v string) map[string]any {
		spec := deepCopy(baselines["Cluster"])
		spec["kubernetesVersion"] = v
		return spec
	}
	refused := func(v string) func() bool {
		return func() bool {
			_, err := submit(crd, "v1alpha1", withVersion(v))
			return err != nil && strings.Contains(err.Error(), `spec.kubernetesVersion: Invalid value: "`+v+`": the garden provisions Kubernetes up to`)
		}
	}
	testenv.Eventually(t, "1.37 refused above the published 1.36", 30*time.Second, refused("1.37"))
	for _, v := range []string{"1.36", "1.36.4", "1.32"} {
		if _, err := submit(crd, "v1alpha1", withVersion(v)); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}
	if !refused("1.40.1")() {
		t.Error("1.40.1 admitted")
	}

	// A Cluster stored with 1.36 while the garden offered it, then the newest lowered: an
	// edit that keeps the version passes, one that sets a newer version does not.
	kept := &unstructured.Unstructured{Object: map[string]any{"spec": withVersion("1.36")}}
	kept.SetAPIVersion(operatorv1alpha1.GroupVersion.String())
	kept.SetKind("Cluster")
	kept.SetNamespace(namespace)
	kept.SetName("version-kept")
	if err := env.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, kept) })
	param.Data[operatorv1alpha1.LandscapeNewestKubernetesVersionKey] = "1.35"
	if err := env.Client.Update(ctx, param); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "1.36 refused above the published 1.35", 30*time.Second, refused("1.36"))
	kept.SetLabels(map[string]string{"edited": "true"})
	if err := env.Client.Update(ctx, kept, client.DryRunAll); err != nil {
		t.Errorf("an edit keeping version 1.36 refused: %v", err)
	}

	if err := env.Client.Delete(ctx, param); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "every version admitted without the published landscape", 30*time.Second, func() bool {
		_, err := submit(crd, "v1alpha1", withVersion("1.40"))
		return err == nil
	})
}
