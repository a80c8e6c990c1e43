package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestPodIdentityPoliciesStayInTheirNamespace: with config/policy/pod-identity-policies.yaml
// installed as shipped, a PodIdentityPolicy may allow DNS names of its own namespace's
// Services only; one naming another namespace's Service, or any other name, is refused
// when written, the message naming the ServiceAccount and the name.
func TestPodIdentityPoliciesStayInTheirNamespace(t *testing.T) {
	ctx := context.Background()
	objs, err := config.Policies()
	if err != nil {
		t.Fatal(err)
	}
	installed := 0
	for _, obj := range objs {
		if obj.GetName() != "trustplane-pod-identity-policies" {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		installed++
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	if installed != 2 {
		t.Fatalf("%d objects named trustplane-pod-identity-policies in config/policy, want the policy and its binding", installed)
	}
	crd := crdOf(t, "PodIdentityPolicy")
	withNames := func(names ...string) map[string]any {
		spec := deepCopy(baselines["PodIdentityPolicy"])
		dnsNames := []any{}
		for _, n := range names {
			dnsNames = append(dnsNames, n)
		}
		spec["serviceAccounts"].([]any)[0].(map[string]any)["dnsNames"] = dnsNames
		return spec
	}
	// The namespace of every probe is "default".
	refusal := func(names ...string) error {
		_, err := submit(crd, "v1alpha1", withNames(names...))
		return err
	}
	testenv.Eventually(t, "a name of another namespace refused", 30*time.Second, func() bool {
		err := refusal("web.default.svc", "api.kube-system.svc")
		return err != nil && strings.Contains(err.Error(), "DNS names outside namespace default") && strings.Contains(err.Error(), "web: api.kube-system.svc") &&
			!strings.Contains(err.Error(), "web.default.svc,")
	})
	for _, names := range [][]string{{"payments.example.com"}, {"default.svc"}, {"web.default.svc.cluster.local", "api.kube-system.svc.cluster.local"},
		{"web.default.svc.kube-system.svc.cluster.local"}, {"web.default.svcx.example"}, {"web.default.svc.example.svc"}} {
		if err := refusal(names...); err == nil || !strings.Contains(err.Error(), "DNS names outside namespace default") {
			t.Errorf("%q admitted, or refused for another reason: %v", names, err)
		}
	}
	// A cluster domain other than cluster.local too: which one is the signer's to check.
	for _, names := range [][]string{{"web.default.svc"}, {"web.default.svc.cluster.local", "web-0.web.default.svc.cluster.local"}, {"web.default.svc.corp.internal"}, {}} {
		if err := refusal(names...); err != nil {
			t.Errorf("%q refused: %v", names, err)
		}
	}
}
