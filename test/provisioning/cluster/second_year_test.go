package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/provisioning/shoot/shoottest"
	"github.com/trustplane/trustplane/internal/testenv"
)

// secondYearCluster is landscapeCluster in its second year (shoottest.AddSecondYear).
func secondYearCluster(provider, name string) *operatorv1alpha1.Cluster {
	c := landscapeCluster(provider, name)
	shoottest.AddSecondYear(c)
	return c
}

// TestSecondYearShootsAreAccepted: the Shoot of a Cluster with every field of a
// landscape's second year passes the test garden's schema and CEL rules and its admission
// (through the front) on each provider, and carries each of them (issue 41: every new
// Shoot passes Gardener's own validation).
func TestSecondYearShootsAreAccepted(t *testing.T) {
	front := frontClient(t)
	for _, provider := range []string{"aws", "azure", "gcp", "openstack"} {
		s := landscapeShootOf(t, secondYearCluster(provider, "year2-"+provider))
		paths := []string{"kubernetes.version", "kubernetes.kubeAPIServer.serviceAccountConfig.maxTokenExpiration"}
		if provider == "aws" || provider == "gcp" {
			paths = append(paths, "networking.ipFamilies")
		}
		for _, path := range paths {
			if v, found, _ := unstructured.NestedFieldNoCopy(s.Object, append([]string{"spec"}, strings.Split(path, ".")...)...); !found || v == nil {
				t.Errorf("%s: spec.%s is not set: the test proves less than it says", provider, path)
			}
		}
		workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
		extensions, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
		types := fmt.Sprint(extensions)
		if len(workers) != 3 || !strings.Contains(types, "type:registry-cache") || (provider == "aws" || provider == "azure") != strings.Contains(types, "type:acl") {
			t.Errorf("%s: %d workers, extensions %s", provider, len(workers), types)
		}
		if err := front.Create(ctx, s, client.DryRunAll); err != nil {
			t.Errorf("%s: the second-year shoot is refused: %v", provider, err)
			continue
		}
		// The verdict, for the record (make test -v prints it).
		var names []string
		for _, e := range extensions {
			names = append(names, fmt.Sprint(e.(map[string]any)["type"]))
		}
		t.Logf("%s: the test garden admits the second-year Shoot: %d worker pools, extensions %s", provider, len(workers), strings.Join(names, ", "))
	}
}

// TestSecondYearRulesRefuseCounterExamples: each Gardener and extension rule for what a
// second-year Cluster adds refuses a second-year Shoot changed to break it (the test
// garden's schema and CEL rules asked directly; the CloudProfile's versions through the
// front).
func TestSecondYearRulesRefuseCounterExamples(t *testing.T) {
	cache := func(change func(map[string]any)) func(*unstructured.Unstructured) {
		return onExtension("registry-cache", func(e map[string]any) {
			change(e["providerConfig"].(map[string]any)["caches"].([]any)[0].(map[string]any))
		})
	}
	aclRule := func(change func(map[string]any)) func(*unstructured.Unstructured) {
		return onExtension("acl", func(e map[string]any) { change(e["providerConfig"].(map[string]any)["rule"].(map[string]any)) })
	}
	sixtyCIDRs := make([]any, 51)
	for i := range sixtyCIDRs {
		sixtyCIDRs[i] = fmt.Sprintf("203.0.113.%d/32", i)
	}
	for _, tc := range []struct {
		name   string
		change func(*unstructured.Unstructured)
		want   string // "": accepted
	}{
		// Worker pools: gardener pkg/api/core/validation/shoot.go ValidateWorker, validateTaints, ValidateCRI.
		{"pool name at most 15", onWorker(1, func(w map[string]any) { w["name"] = "a-name-too-long-" }), "spec.provider.workers[1].name"},
		{"pool names unique", onWorker(2, func(w map[string]any) { w["name"] = "gpu" }), "Duplicate value"},
		{"pool label keys", onWorker(1, func(w map[string]any) { w["labels"] = map[string]any{"not a key": "x"} }), "labels"},
		{"pool label values", onWorker(1, func(w map[string]any) { w["labels"] = map[string]any{"role": "not a value"} }), "labels"},
		{"taint effects", onWorker(1, func(w map[string]any) { w["taints"].([]any)[0].(map[string]any)["effect"] = "Sometimes" }), `Unsupported value: "Sometimes"`},
		{"taint keys not gardener's", onWorker(1, func(w map[string]any) {
			w["taints"].([]any)[0].(map[string]any)["key"] = "node.gardener.cloud/critical-components-not-ready"
		}), "taint key is reserved by gardener"},
		{"taints unique by key and effect", onWorker(1, func(w map[string]any) { w["taints"] = append(w["taints"].([]any), w["taints"].([]any)[0]) }), "unique by key and effect"},
		{"only containerd", onWorker(0, func(w map[string]any) { w["cri"] = map[string]any{"name": "docker"} }), `Unsupported value: "docker"`},
		// Registry caches: gardener-extension-registry-cache validation and admission.
		{"caches required", onExtension("registry-cache", func(e map[string]any) { e["providerConfig"].(map[string]any)["caches"] = []any{} }), "with at least one cache"},
		{"a providerConfig required", onExtension("registry-cache", func(e map[string]any) { delete(e, "providerConfig") }), "must be a RegistryConfig"},
		{"upstream host and port", cache(func(c map[string]any) { c["upstream"] = "https://docker.io" }), "each upstream <host>[:<port>]"},
		{"upstream port in range", cache(func(c map[string]any) { c["upstream"] = "docker.io:65536" }), "each upstream <host>[:<port>]"},
		{"no upstream twice", onExtension("registry-cache", func(e map[string]any) {
			caches := e["providerConfig"].(map[string]any)["caches"].([]any)
			caches[1].(map[string]any)["upstream"] = caches[0].(map[string]any)["upstream"]
		}), "no upstream twice"},
		{"volume above 0", cache(func(c map[string]any) { c["volume"] = map[string]any{"size": "0"} }), "volume.size must be greater than 0"},
		{"ttl not negative", cache(func(c map[string]any) { c["garbageCollection"] = map[string]any{"ttl": "-1h0m0s"} }), "ttl must be a non-negative duration"},
		// The API server ACL: gardener-extension-acl ValidateExtensionSpec.
		{"acl action", aclRule(func(r map[string]any) { r["action"] = "PERMIT" }), "action ALLOW or DENY"},
		{"acl type", aclRule(func(r map[string]any) { r["type"] = "client_ip" }), "type direct_remote_ip, remote_ip or source_ip"},
		{"acl CIDRs not empty", aclRule(func(r map[string]any) { r["cidrs"] = []any{} }), "1 to 50 CIDRs"},
		{"acl CIDRs parse", aclRule(func(r map[string]any) { r["cidrs"] = []any{"10.0.0.0/33"} }), "1 to 50 CIDRs"},
		{"acl at most 50 CIDRs", aclRule(func(r map[string]any) { r["cidrs"] = sixtyCIDRs }), "1 to 50 CIDRs"},
		// IP families: gardener pkg/api/core/validation/utils.go ValidateIPFamilies.
		{"ip families known", setSpec([]any{"IPv4", "IPv5"}, "networking", "ipFamilies"), `Unsupported value: "IPv5"`},
		{"ip families once", setSpec([]any{"IPv4", "IPv4"}, "networking", "ipFamilies"), "ipFamilies: Duplicate value"},
		// maxTokenExpiration: gardener shoot.go validateKubernetes.
		{"token lifetime at least 720h", setSpec("24h0m0s", "kubernetes", "kubeAPIServer", "serviceAccountConfig", "maxTokenExpiration"), "at least 720h (30d)"},
		{"token lifetime at most 2160h", setSpec("3000h0m0s", "kubernetes", "kubeAPIServer", "serviceAccountConfig", "maxTokenExpiration"), "at most 2160h (90d)"},
		{"token lifetime 0", setSpec("0s", "kubernetes", "kubeAPIServer", "serviceAccountConfig", "maxTokenExpiration"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := landscapeShootOf(t, secondYearCluster("aws", "year2-rule"))
			tc.change(s)
			checkAnswer(t, mgmt.Client.Create(ctx, s, client.DryRunAll), tc.want)
		})
	}
	front := frontClient(t)
	for _, tc := range []struct{ version, want string }{{"1.36", ""}, {"1.32.11", ""}, {"1.37", `spec.kubernetes.version: Unsupported value: "1.37"`}, {"1.35.99", "Unsupported value"}} {
		s := landscapeShootOf(t, secondYearCluster("gcp", "year2-version"))
		_ = unstructured.SetNestedField(s.Object, tc.version, "spec", "kubernetes", "version")
		err := front.Create(ctx, s, client.DryRunAll)
		if (tc.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.want) || !isStatus(err, http.StatusForbidden))) {
			t.Errorf("version %s: %v, want %q", tc.version, err, tc.want)
		}
	}
}

// TestIPFamiliesUpdate: Gardener lets a Shoot go from IPv4 to IPv4 and IPv6 and back, and
// nothing else.
func TestIPFamiliesUpdate(t *testing.T) {
	base := landscapeShootOf(t, landscapeCluster("gcp", "ip-families"))
	// As Gardener defaults it (pkg/apis/core/v1beta1/defaults_shoot.go).
	_ = unstructured.SetNestedSlice(base.Object, []any{"IPv4"}, "spec", "networking", "ipFamilies")
	if err := mgmt.Client.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, base) })
	families := func(f ...any) func(*unstructured.Unstructured) {
		return func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(s.Object, f, "spec", "networking", "ipFamilies")
		}
	}
	checkUpdate(t, base.GetName(), families("IPv6"), "unsupported IP family update")
	checkUpdate(t, base.GetName(), families("IPv6", "IPv4"), "unsupported IP family update")
	checkUpdate(t, base.GetName(), families("IPv4", "IPv6"), "")
}

// isStatus says whether err is an API status with code.
func isStatus(err error, code int) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && int(status.Status().Code) == code
}

// TestSecondYearClusterReachesTheShoot: a second-year Cluster on aws becomes Ready with
// a Shoot (accepted through the front) carrying its pools, caches, ACL and IPv6, and
// RegistryCacheConfigured once Gardener reconciled it; without caches the Shoot loses the
// extension and the Cluster the condition.
func TestSecondYearClusterReachesTheShoot(t *testing.T) {
	runOperatorsWith(t, true, landscapeParams())
	poolSecret(t, "aws-shared-eu-y2", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true", cp.LabelEUAccess: "true"})
	c := secondYearCluster("aws", "year2")
	c.Namespace = ns
	c.Spec.Administrators = []string{"admin@example.com"}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, c.Name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	published := &corev1.ConfigMap{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: operatorv1alpha1.LandscapeConfigMap}, published); err != nil ||
		published.Data[operatorv1alpha1.LandscapeNewestKubernetesVersionKey] != "1.36" {
		t.Errorf("the landscape published for admission: %v, %v", published.Data, err)
	}
	cond := waitCondition(t, c.Name, operatorv1alpha1.ConditionRegistryCacheConfigured, metav1.ConditionTrue, operatorv1alpha1.ReasonRegistryCacheConfigured)
	if !strings.Contains(cond.Message, "docker.io, registry.example.com:5000") {
		t.Errorf("RegistryCacheConfigured says %q", cond.Message)
	}
	s, err := getShoot(shoot.Name(ns, c.Name))
	if err != nil {
		t.Fatal(err)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	extensions, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	families, _, _ := unstructured.NestedStringSlice(s.Object, "spec", "networking", "ipFamilies")
	if len(workers) != 3 || !strings.Contains(fmt.Sprint(extensions), "type:registry-cache") || !strings.Contains(fmt.Sprint(extensions), "type:acl") || fmt.Sprint(families) != "[IPv4 IPv6]" {
		t.Errorf("shoot: %d workers, extensions %v, ipFamilies %v", len(workers), extensions, families)
	}

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &operatorv1alpha1.Cluster{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
			return err
		}
		live.Spec.RegistryCache = nil
		return mgmt.Client.Update(ctx, live)
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the shoot without the registry-cache extension and the Cluster without the condition", 30*time.Second, func() bool {
		s, err := getShoot(shoot.Name(ns, c.Name))
		if err != nil {
			return false
		}
		extensions, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
		live := &operatorv1alpha1.Cluster{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
			return false
		}
		return !strings.Contains(fmt.Sprint(extensions), "type:registry-cache") &&
			meta.FindStatusCondition(live.Status.Conditions, operatorv1alpha1.ConditionRegistryCacheConfigured) == nil
	})
}
