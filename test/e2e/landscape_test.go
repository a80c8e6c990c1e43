package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// gardenNamespace is the project namespace of the garden the manager is given: this API
// server, with the test garden's Shoot CRD (test/provisioning/cluster/testdata).
const gardenNamespace = "garden-e2e"

// gardenInThisServer makes this API server a garden enough for the manager to connect
// to (its Shoots, in gardenNamespace) and returns an admin kubeconfig for it, as the
// garden's kubeconfig Secret would hold.
func gardenInThisServer(t *testing.T) string {
	t.Helper()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true,
		Paths: []string{filepath.Join(testenv.RepoRoot(), "test", "provisioning", "cluster", "testdata", "shoots.yaml")}}); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardenNamespace}})
	return env.AdminKubeconfig(t)
}

// testLandscapeAdmission: the manager, as leader and under its own ServiceAccount,
// publishes the landscape's newest Kubernetes version (trustplane-landscape in its
// namespace); with it the shipped admission policy trustplane-cluster-versions refuses a
// Cluster asking for a newer one, naming the field, and admits the newest.
func testLandscapeAdmission(t *testing.T) {
	cm := &corev1.ConfigMap{}
	testenv.Eventually(t, "the landscape published", 60*time.Second, func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: operatorv1alpha1.LandscapeConfigMap}, cm)
		return err == nil && cm.Data[operatorv1alpha1.LandscapeNewestKubernetesVersionKey] == "1.36"
	})
	withVersion := func(v string) error {
		c := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"core": map[string]any{"purpose": "production", "region": "eu-west-1"},
			"infrastructure": map[string]any{"provider": "aws", "machineType": "m5.xlarge", "autoScalerMin": int64(1),
				"autoScalerMax": int64(3), "numberOfZones": int64(1), "subscriptionSelector": "shared"},
			"kubernetesVersion": v}}}
		c.SetAPIVersion(operatorv1alpha1.GroupVersion.String())
		c.SetKind("Cluster")
		c.SetNamespace(managerNamespace)
		c.SetGenerateName("versioned-")
		return env.Client.Create(ctx, c, client.DryRunAll)
	}
	testenv.Eventually(t, "1.37 refused above the published 1.36", 30*time.Second, func() bool {
		err := withVersion("1.37")
		return err != nil && strings.Contains(err.Error(), `spec.kubernetesVersion: Invalid value: "1.37": the garden provisions Kubernetes up to`)
	})
	if err := withVersion("1.36"); err != nil {
		t.Errorf("1.36 refused: %v", err)
	}
}
