// Package cluster_test tests the Cluster operator end to end with real API servers: one plays
// the management cluster and the Gardener garden (with a Shoot CRD behind a small front
// that serves shoots/adminkubeconfig), the other the provisioned shoot. The Subscription
// and Kubeconfig operators run alongside, so a Cluster goes from credential to Shoot to
// administrators and issued kubeconfigs, and back to nothing on deletion.
package cluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	subscriptionctrl "github.com/trustplane/trustplane/internal/provisioning/subscription"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

const projectNamespace = "garden-test"

var (
	// ns is the namespace of the running test's Clusters and pool: each test takes a fresh
	// one (the tests run one after another: they share the test gardener).
	ns string

	mgmt, shootEnv *testenv.Env // mgmt is also the garden
	gardenFront    *front
	testGardener   *gardenstandin.Gardener
	ctx            = context.Background()
)

func TestMain(m *testing.M) {
	// One logger: controller-runtime keeps the first it is given.
	if os.Getenv("TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	var err error
	if shootEnv, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.Main(&setupThenRun{m}, &mgmt)
	_ = shootEnv.Stop()
	os.Exit(code)
}

// setupThenRun prepares the garden once the management API server is up.
type setupThenRun struct{ m *testing.M }

func (s *setupThenRun) Run() int {
	if err := prepareGarden(); err != nil {
		fmt.Fprintln(os.Stderr, "preparing the test garden:", err)
		return 1
	}
	defer gardenFront.Close()
	defer stopGardener()
	return s.m.Run()
}

var stopGardener context.CancelFunc = func() {}

func prepareGarden() error {
	// The manager's assembly registers what each controller collects; here, the suite does.
	collectors := append(append(append(status.Metrics(), clusterctrl.Collectors()...), kubeconfigctrl.Collectors()...), subscriptionctrl.Collectors()...)
	if err := manager.RegisterMetrics(collectors...); err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(mgmt.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "shoots.yaml")}, ErrorIfPathMissing: true}); err != nil {
		return err
	}
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: projectNamespace}}); err != nil {
		return err
	}
	if err := prepareLandscape(); err != nil {
		return err
	}
	admin, err := adminUser(shootEnv.Environment())
	if err != nil {
		return err
	}
	if gardenFront, err = newFront(mgmt, admin); err != nil {
		return err
	}
	gardenerCtx, cancel := context.WithCancel(ctx)
	stopGardener = cancel
	testGardener, err = gardenstandin.StartGardener(gardenerCtx, mgmt.Config)
	return err
}

// runOperators starts the cluster, subscription and kubeconfig controllers with the
// garden behind the front (or without a garden), in a fresh namespace for the test.
func runOperators(t *testing.T, withGarden bool) {
	t.Helper()
	params := shoot.DefaultParams()
	params.Namespace = projectNamespace
	runOperatorsWith(t, withGarden, params)
}

// runOperatorsWith is runOperators with the Shoot settings params.
func runOperatorsWith(t *testing.T, withGarden bool, params shoot.Params) {
	t.Helper()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-test-"}}
	if err := mgmt.Client.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns = namespace.Name
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		var g *garden.Garden
		if withGarden {
			var err error
			if g, err = garden.New(mgr, gardenFront.Config(), params, 10*time.Minute); err != nil {
				return err
			}
		}
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		clusterOpts, kubeconfigOpts := clusterctrl.DefaultOptions(), kubeconfigctrl.DefaultOptions()
		clusterOpts.Garden, kubeconfigOpts.Garden = g, g
		clusterOpts.LandscapeNamespace = ns
		if _, err := clusterctrl.Setup(mgr, clusterOpts); err != nil {
			return err
		}
		if _, err := subscriptionctrl.Setup(mgr, subscriptionctrl.Options{Pool: subscriptionctrl.PoolSecrets, PoolNamespace: ns}); err != nil {
			return err
		}
		_, err := kubeconfigctrl.Setup(mgr, kubeconfigOpts)
		return err
	})
}

func poolSecret(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: map[string][]byte{"credentials": []byte("hyperscaler secret " + name)}}
	if err := mgmt.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func getCluster(t *testing.T, name string) *operatorv1alpha1.Cluster {
	t.Helper()
	c := &operatorv1alpha1.Cluster{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// changeSpec changes a Cluster's spec with a merge patch: unlike an update, it does not
// conflict with the controller's status writes.
func changeSpec(t *testing.T, name string, change func(*operatorv1alpha1.Cluster)) *operatorv1alpha1.Cluster {
	t.Helper()
	c := getCluster(t, name)
	patch := client.MergeFrom(c.DeepCopy())
	change(c)
	if err := mgmt.Client.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitCondition waits for a Cluster condition computed for the Cluster's current
// generation and returns it. (status.observedGeneration itself only follows generations
// that are Ready or Stalled, not those still in progress.)
func waitCondition(t *testing.T, name, condition string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	testenv.Eventually(t, fmt.Sprintf("Cluster %s %s=%s (%s)", name, condition, status, reason), 30*time.Second, func() bool {
		c := &operatorv1alpha1.Cluster{}
		if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return false
		}
		last = meta.FindStatusCondition(c.Status.Conditions, condition)
		return last != nil && last.Status == status && last.Reason == reason && last.ObservedGeneration == c.Generation
	})
	return *last
}

func getShoot(name string) (*unstructured.Unstructured, error) {
	s := garden.NewShoot()
	return s, mgmt.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace, Name: name}, s)
}

func gone(c client.Client, obj client.Object) func() bool {
	return func() bool { return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
}

// canI asks the shoot API server whether user may do verb on resource in namespace.
func canI(t *testing.T, user, verb, resource, namespace string) bool {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(shootEnv.Config)
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: resource, Namespace: namespace}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

// waitCanI waits until the shoot's authorizer answers want: kube-apiserver authorizes
// from an informer-fed cache, which trails the binding writes by a little.
func waitCanI(t *testing.T, want bool, user, verb, resource, namespace string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("can %s %s %s in %q: %v", user, verb, resource, namespace, want), 10*time.Second, func() bool {
		return canI(t, user, verb, resource, namespace) == want
	})
}

func TestGardenerClusterLifecycle(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "aws-shared-1", map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true"})
	name := "example-cluster"
	shootName := shoot.Name(ns, name)
	testGardener.Hold(shootName)
	c := &operatorv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"plan": "trial", "globalaccountid": "abcd-0001"}},
		Spec: operatorv1alpha1.ClusterSpec{
			Core:       operatorv1alpha1.ClusterCore{Purpose: "production", Region: "eu-central-1"},
			Extensions: &runtime.RawExtension{Raw: []byte(`{"shootNetworkingFilterDisabled":true}`)},
			OIDCConfig: &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
				UsernameClaim: "email", UsernamePrefix: "-", SigningAlgs: []string{"RS256"}},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{MachineType: "m5.2xlarge", AutoScalerMin: 3, AutoScalerMax: 5,
				Provider: "aws", NumberOfZones: 3, SubscriptionSelector: "shared"},
			Administrators: []string{"user.id@example.com", "other.id@example.com"},
		},
	}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}

	// The credential, then the Shoot with every mapped field; held by "Gardener" at 30%.
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionFalse, operatorv1alpha1.ReasonProvisioning)
	testenv.Eventually(t, "the provisioning message to report Gardener's progress", 30*time.Second, func() bool {
		cond := meta.FindStatusCondition(getCluster(t, name).Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
		return cond != nil && cond.Reason == operatorv1alpha1.ReasonProvisioning && strings.Contains(cond.Message, "Create processing (30%)")
	})
	sr := &cp.SubscriptionRequest{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sr); err != nil {
		t.Fatal(err)
	}
	if sr.Spec.Provider != "aws" || sr.Spec.SubscriptionSelector != "shared" || sr.Status.GardenerSecretName != "aws-shared-1" {
		t.Errorf("SubscriptionRequest spec %+v status %+v", sr.Spec, sr.Status)
	}
	s, err := getShoot(shootName)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"spec.cloudProfile.name":      "aws",
		"spec.region":                 "eu-central-1",
		"spec.credentialsBindingName": "aws-shared-1",
		"spec.purpose":                "production",
		"spec.provider.type":          "aws",
		"spec.networking.type":        "calico",
		// OIDC through structured authentication: oidcConfig is forbidden for Kubernetes >= 1.32.
		"spec.kubernetes.kubeAPIServer.structuredAuthentication.configMapName": shoot.AuthenticationConfigMapName(shootName),
		"spec.controlPlane.highAvailability.failureTolerance.type":             "zone", // purpose production
		"spec.provider.infrastructureConfig.kind":                              "InfrastructureConfig",
		"spec.provider.infrastructureConfig.networks.vpc.cidr":                 "10.250.0.0/16",

		// The seed's plan and global account, as labels on the Shoot.
		"metadata.labels.plan":            "trial",
		"metadata.labels.globalaccountid": "abcd-0001",
	}
	for path, v := range want {
		if got, _, _ := unstructured.NestedFieldNoCopy(s.Object, strings.Split(path, ".")...); got != v {
			t.Errorf("shoot %s = %v, want %v", path, got, v)
		}
	}
	if _, found, _ := unstructured.NestedString(s.Object, "spec", "secretBindingName"); found {
		t.Error("shoot sets secretBindingName, which Gardener forbids for new Kubernetes versions")
	}
	if _, found, _ := unstructured.NestedMap(s.Object, "spec", "kubernetes", "kubeAPIServer", "oidcConfig"); found {
		t.Error("shoot sets oidcConfig, which Gardener forbids for Kubernetes >= 1.32")
	}
	authentication := &corev1.ConfigMap{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace, Name: shoot.AuthenticationConfigMapName(shootName)}, authentication); err != nil {
		t.Errorf("the structured authentication ConfigMap: %v", err)
	} else if config := authentication.Data[shoot.AuthenticationConfigKey]; !strings.Contains(config, "url: https://issuer.example") || !strings.Contains(config, "- kyma") {
		t.Errorf("AuthenticationConfiguration %q", config)
	}
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	if len(workers) != 1 {
		t.Fatalf("workers %v", workers)
	}
	w := workers[0].(map[string]any)
	if w["machine"].(map[string]any)["type"] != "m5.2xlarge" || w["minimum"] != int64(3) || w["maximum"] != int64(5) ||
		fmt.Sprint(w["zones"]) != "[eu-central-1a eu-central-1b eu-central-1c]" {
		t.Errorf("worker pool %v", w)
	}
	ext, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	// The seed's toggle; no shoot-oidc-service (issue 27: trustplane makes no OpenIDConnect
	// resources for it, so it is not enabled).
	if fmt.Sprint(ext) != "[map[disabled:true type:shoot-networking-filter]]" {
		t.Errorf("extensions %v", ext)
	}
	if n := gardenFront.AdminRequestsFor(shootName); n != 0 {
		t.Errorf("%d admin kubeconfigs requested before the shoot was provisioned", n)
	}

	// Gardener finishes: provisioned, administrators are cluster-admin in the shoot.
	testGardener.Release(projectNamespace, shootName)
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioned)
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	if got := getCluster(t, name).Status.ShootName; got != shootName {
		t.Errorf("status.shootName %q, want %q", got, shootName)
	}
	for _, admin := range c.Spec.Administrators {
		waitCanI(t, true, admin, "delete", "secrets", "kube-system") // cluster-admin in the shoot
	}
	if canI(t, "stranger@example.com", "get", "secrets", "kube-system") {
		t.Fatal("the SubjectAccessReview check allows anyone: it proves nothing")
	}
	if gardenFront.AdminRequestsFor(shootName) == 0 {
		t.Error("administrators were bound without an admin kubeconfig from the garden")
	}
	assertAdminKubeconfigNotStored(t)

	// Gardener's periodic reconcile reports progress on the Shoot: the condition follows,
	// and no new admin kubeconfig is asked for (the administrators are bound already).
	adminRequests := gardenFront.AdminRequestsFor(shootName)
	s, err = getShoot(shootName)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(s.Object, map[string]any{"type": "Reconcile", "state": "Processing", "progress": int64(50)}, "status", "lastOperation"); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioned)
	testenv.Eventually(t, "the condition to follow Gardener's reconcile", 30*time.Second, func() bool {
		cond := meta.FindStatusCondition(getCluster(t, name).Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
		return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "Reconcile processing (50%)")
	})
	if !meta.IsStatusConditionTrue(getCluster(t, name).Status.Conditions, conditions.Ready) {
		t.Error("Ready went false during Gardener's reconcile")
	}
	if n := gardenFront.AdminRequestsFor(shootName); n != adminRequests {
		t.Errorf("a Shoot progress update asked for %d more admin kubeconfigs", n-adminRequests)
	}

	// One administrator leaves: only that binding goes.
	changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Administrators = []string{"other.id@example.com"} })
	testenv.Eventually(t, "the former administrator's binding to go", 30*time.Second, func() bool {
		return !canI(t, "user.id@example.com", "delete", "secrets", "kube-system")
	})
	if !canI(t, "other.id@example.com", "delete", "secrets", "kube-system") {
		t.Error("the remaining administrator lost cluster-admin")
	}

	// A KubeconfigRequest against the Gardener cluster, through the admin kubeconfig.
	if err := shootEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lifecycle-manager"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: name, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	var issued []byte
	testenv.Eventually(t, "a kubeconfig for the Gardener cluster", 30*time.Second, func() bool {
		_ = mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr)
		issued, _ = base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
		return len(issued) > 0
	})
	cfg, err := clientcmd.RESTConfigFromKubeConfig(issued)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	testenv.Eventually(t, "the issued kubeconfig to list configmaps in team", 10*time.Second, func() bool {
		_, err := kube.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{})
		return err == nil
	})
	if _, err := kube.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets with the issued kubeconfig: %v, want forbidden", err)
	}
	assertAdminKubeconfigNotStored(t)

	// Deletion waits for the KubeconfigRequest, which cleans up in the shoot first.
	if err := mgmt.Client.Delete(ctx, getCluster(t, name)); err != nil {
		t.Fatal(err)
	}
	cond := waitCondition(t, name, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonInUse)
	if !strings.Contains(cond.Message, "lifecycle-manager") {
		t.Errorf("InUse message %q does not name the request", cond.Message)
	}
	if _, err := getShoot(shootName); err != nil {
		t.Fatalf("the shoot went while a KubeconfigRequest still used it: %v", err)
	}
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the KubeconfigRequest to go", 30*time.Second, gone(mgmt.Client, kr))
	sas := &corev1.ServiceAccountList{}
	if err := shootEnv.Client.List(ctx, sas, client.InNamespace(kubeconfigctrl.TargetNamespace)); err != nil || len(sas.Items) != 0 {
		t.Errorf("service accounts left in the shoot: %d (%v)", len(sas.Items), err)
	}
	// Then the Shoot (confirmed, or the front would refuse), the credential, the Cluster.
	testenv.Eventually(t, "the Cluster to go", 30*time.Second, gone(mgmt.Client, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	if _, err := getShoot(shootName); !apierrors.IsNotFound(err) {
		t.Errorf("shoot after the Cluster went: %v", err)
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cp.SubscriptionRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("SubscriptionRequest after the Cluster went: %v", err)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(authentication), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the structured authentication ConfigMap after the Cluster went: %v", err)
	}
	pool := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "aws-shared-1"}, pool); err != nil || pool.Labels[cp.LabelDirty] == "true" {
		t.Errorf("shared pool credential after release: dirty=%q err=%v", pool.Labels[cp.LabelDirty], err)
	}
}

// assertAdminKubeconfigNotStored: no Secret, ConfigMap or Cluster in the management
// cluster holds the admin credential handed out by the garden.
func assertAdminKubeconfigNotStored(t *testing.T) {
	t.Helper()
	admin, err := clientcmd.Load(gardenFront.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var needles [][]byte
	for _, a := range admin.AuthInfos {
		needles = append(needles, a.ClientKeyData, a.ClientCertificateData)
	}
	secrets := &corev1.SecretList{}
	configMaps := &corev1.ConfigMapList{}
	clusters := &operatorv1alpha1.ClusterList{}
	for _, list := range []client.ObjectList{secrets, configMaps, clusters} {
		if err := mgmt.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	var haystack [][]byte
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			haystack = append(haystack, v, []byte(base64.StdEncoding.EncodeToString(v)))
		}
	}
	for _, cm := range configMaps.Items {
		for _, v := range cm.Data {
			haystack = append(haystack, []byte(v))
		}
	}
	for _, c := range clusters.Items {
		haystack = append(haystack, []byte(fmt.Sprint(c.Status)))
	}
	for _, n := range needles {
		if len(n) == 0 {
			continue
		}
		if slices.ContainsFunc(haystack, func(h []byte) bool {
			return bytes.Contains(h, n) || bytes.Contains(h, []byte(base64.StdEncoding.EncodeToString(n)))
		}) {
			t.Fatal("the shoot's admin credential is stored in the management cluster")
		}
	}
}

func TestBroughtAlongCluster(t *testing.T) {
	runOperators(t, true)
	name := "byoc"
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "byoc-admin"}, Administrators: []string{"byoc-admin@example.com"}}}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionFalse, operatorv1alpha1.ReasonKubeconfigMissing)

	// A broken kubeconfig stalls with a clear message; nothing is created anywhere.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "byoc-admin"}, Data: map[string][]byte{"kubeconfig": []byte("clusters: [this is not a kubeconfig")}}
	if err := mgmt.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cond := waitCondition(t, name, conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonKubeconfigInvalid)
	if !strings.Contains(cond.Message, "byoc-admin") {
		t.Errorf("message %q does not name the Secret", cond.Message)
	}

	// The real kubeconfig: provisioned without Gardener, the administrator bound.
	secret.Data["kubeconfig"] = shootEnv.Environment().KubeConfig
	if err := mgmt.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionTrue, operatorv1alpha1.ReasonBroughtAlong)
	if c := getCluster(t, name); meta.FindStatusCondition(c.Status.Conditions, conditions.Stalled) != nil {
		t.Error("Stalled stays after the kubeconfig was fixed")
	}
	waitCanI(t, true, "byoc-admin@example.com", "delete", "secrets", "kube-system") // cluster-admin in the brought-along cluster
	if _, err := getShoot(shoot.Name(ns, name)); !apierrors.IsNotFound(err) {
		t.Errorf("a brought-along cluster got a shoot: %v", err)
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cp.SubscriptionRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("a brought-along cluster got a SubscriptionRequest: %v", err)
	}

	// A binding made by someone else with the same label shape is not ours to judge by
	// name; deleting the Cluster removes exactly the administrators' bindings it made.
	other := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses-admin-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "someone"}}}
	if err := shootEnv.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the brought-along Cluster to go", 30*time.Second, gone(mgmt.Client, c))
	waitCanI(t, false, "byoc-admin@example.com", "delete", "secrets", "kube-system") // the binding went with its Cluster
	if err := shootEnv.Client.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Errorf("someone else's binding was touched: %v", err)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Errorf("the user's kubeconfig Secret was touched: %v", err)
	}
	bindings := &rbacv1.ClusterRoleBindingList{}
	if err := shootEnv.Client.List(ctx, bindings, client.MatchingLabels{operatorv1alpha1.AdministratorLabel: access.AdministratorsOf(ns, name)}); err != nil || len(bindings.Items) != 0 {
		t.Errorf("administrator bindings left: %d (%v)", len(bindings.Items), err)
	}
}

func TestGardenUnreachableDeletesNothing(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-1", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "flaky-garden"
	c := gcpCluster(name, "europe-west3")
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)

	gardenFront.Down.Store(true)
	t.Cleanup(func() { gardenFront.Down.Store(false) })                                                    // for the next tests, should this one fail
	c = changeSpec(t, name, func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.AutoScalerMax = 7 }) // a change that needs the garden
	cond := waitCondition(t, name, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonGardenUnreachable)
	if !strings.Contains(cond.Message, "unable to handle the request") {
		t.Errorf("message %q does not say what the garden answered", cond.Message)
	}
	// Deleting while the garden is down keeps the Cluster and its credential.
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // give a wrong implementation time to delete things
	c = getCluster(t, name)
	if !slices.Contains(c.Finalizers, clusterctrl.Finalizer.Name) {
		t.Error("the Cluster lost its finalizer while the garden was down")
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cp.SubscriptionRequest{}); err != nil {
		t.Errorf("the SubscriptionRequest went while the shoot could not be deleted: %v", err)
	}
	s, err := getShoot(shoot.Name(ns, name))
	if err != nil || s.GetDeletionTimestamp() != nil {
		t.Errorf("the shoot was touched while the garden was down: %v", err)
	}

	gardenFront.Down.Store(false)
	testenv.Eventually(t, "the Cluster to go once the garden is back", 60*time.Second, gone(mgmt.Client, c))
	if _, err := getShoot(shoot.Name(ns, name)); !apierrors.IsNotFound(err) {
		t.Errorf("shoot after the Cluster went: %v", err)
	}
}

// TestGardenDownAtStartStopsNothing: a garden that does not answer when the manager starts
// holds up the Cluster controller only. The manager here gives every controller 3 s to sync
// its caches (controller-runtime's default is 2 minutes); the Cluster controller waits for
// the garden regardless, the subscription controller works meanwhile, and once the garden
// answers the Cluster is provisioned.
func TestGardenDownAtStartStopsNothing(t *testing.T) {
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-test-"}}
	if err := mgmt.Client.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns = namespace.Name
	gardenFront.Down.Store(true)
	t.Cleanup(func() { gardenFront.Down.Store(false) })
	const syncTimeout = 3 * time.Second
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: syncTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	params := shoot.DefaultParams()
	params.Namespace = projectNamespace
	g, err := garden.New(mgr, gardenFront.Config(), params, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := clustertarget.AddIndexes(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	clusterOpts := clusterctrl.DefaultOptions()
	clusterOpts.Garden = g
	if _, err := clusterctrl.Setup(mgr, clusterOpts); err != nil {
		t.Fatal(err)
	}
	if _, err := subscriptionctrl.Setup(mgr, subscriptionctrl.Options{Pool: subscriptionctrl.PoolSecrets, PoolNamespace: ns}); err != nil {
		t.Fatal(err)
	}
	managerCtx, stopManager := context.WithCancel(ctx)
	var startErr error
	stopped := make(chan struct{})
	go func() { startErr = mgr.Start(managerCtx); close(stopped) }()
	t.Cleanup(func() { stopManager(); <-stopped })

	poolSecret(t, "gcp-shared-1", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})
	name := "late-garden"
	if err := mgmt.Client.Create(ctx, gcpCluster(name, "europe-west3")); err != nil {
		t.Fatal(err)
	}
	// The subscription controller serves a request of its own while the Cluster
	// controller waits for the garden.
	own := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "independent"},
		Spec: cp.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "shared"}}
	if err := mgmt.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a credential assigned while the garden is down", 30*time.Second, func() bool {
		sr := &cp.SubscriptionRequest{}
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(own), sr) == nil && sr.Status.GardenerSecretName == "gcp-shared-1"
	})
	// Past the sync timeout, the manager still runs.
	time.Sleep(2 * syncTimeout)
	select {
	case <-stopped:
		t.Fatalf("the manager stopped while the garden was down: %v", startErr)
	default:
	}
	gardenFront.Down.Store(false)
	testenv.Eventually(t, "the Shoot once the garden answers", 60*time.Second, func() bool {
		_, err := getShoot(shoot.Name(ns, name))
		return err == nil
	})
}

func gcpCluster(name, region string) *operatorv1alpha1.Cluster {
	return &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: region},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "gcp", MachineType: "n2-standard-4", AutoScalerMin: 1, AutoScalerMax: 3, NumberOfZones: 1},
			Administrators: []string{"admin@example.com"}}}
}

func TestBadClustersStall(t *testing.T) {
	runOperators(t, true)
	poolSecret(t, "gcp-shared-2", map[string]string{cp.LabelHyperscalerType: "gcp", cp.LabelShared: "true"})

	// A spec Gardener could not use: said so, nothing requested.
	incomplete := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "incomplete"},
		Spec: operatorv1alpha1.ClusterSpec{Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "gcp", NumberOfZones: 4}}}
	if err := mgmt.Client.Create(ctx, incomplete); err != nil {
		t.Fatal(err)
	}
	cond := waitCondition(t, "incomplete", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInvalidSpec)
	for _, want := range []string{"spec.core.region is required", "spec.infrastructure.machineType is required"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q lacks %q", cond.Message, want)
		}
	}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "incomplete"}, &cp.SubscriptionRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("an invalid Cluster requested a credential: %v", err)
	}

	// Gardener fails the shoot for good.
	failing := gcpCluster("failing", "fail-region")
	if err := mgmt.Client.Create(ctx, failing); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "failing", operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionFalse, operatorv1alpha1.ReasonProvisioningFailed)
	waitCondition(t, "failing", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioningFailed)

	// A shoot of the same name that is not ours is never taken over.
	squatter := garden.NewShoot()
	squatter.SetNamespace(projectNamespace)
	squatter.SetName(shoot.Name(ns, "squatted"))
	// A valid Shoot (the test garden refuses others), made for someone else.
	theirs, err := shoot.Desired(gcpCluster("someone-else", "elsewhere"), testParams(), "their-binding")
	if err != nil {
		t.Fatal(err)
	}
	squatter.Object["spec"] = theirs.Object["spec"]
	if err := mgmt.Client.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Create(ctx, gcpCluster("squatted", "europe-west3")); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "squatted", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonShootNameTaken)
	if s, _ := getShoot(squatter.GetName()); s.Object["spec"].(map[string]any)["region"] != "elsewhere" {
		t.Error("someone else's shoot was changed")
	}
	// Deleting that Cluster leaves the other shoot alone.
	if err := mgmt.Client.Delete(ctx, getCluster(t, "squatted")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the squatted Cluster to go", 30*time.Second, gone(mgmt.Client, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squatted"}}))
	if _, err := getShoot(squatter.GetName()); err != nil {
		t.Errorf("someone else's shoot was deleted: %v", err)
	}

	// The API server itself rejects what CEL and the schema can judge.
	capitalised := gcpCluster("capitalised", "europe-west3")
	capitalised.Spec.Core.Purpose = "Production" // as in the seed's example
	if err := mgmt.Client.Create(ctx, capitalised); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `supported values: "evaluation", "development", "production", "testing"`) {
		t.Errorf("creating a Cluster with purpose Production: %v", err)
	}
	upsideDown := gcpCluster("upside-down", "europe-west3")
	upsideDown.Spec.Infrastructure.AutoScalerMin, upsideDown.Spec.Infrastructure.AutoScalerMax = 5, 2
	if err := mgmt.Client.Create(ctx, upsideDown); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "autoScalerMin must not exceed autoScalerMax") {
		t.Errorf("creating a Cluster with autoScalerMin > autoScalerMax: %v", err)
	}
}

func TestDedicatedSubscriptionWaitsForPool(t *testing.T) {
	runOperators(t, true)
	name := "dedicated"
	c := gcpCluster(name, "europe-west3")
	c.Spec.Infrastructure.SubscriptionSelector = "globalaccount:ga-42"
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, operatorv1alpha1.ConditionClusterProvisioned, metav1.ConditionFalse, operatorv1alpha1.ReasonWaitingForSubscription)
	testenv.Eventually(t, "the waiting message to pass on why the pool cannot serve", 30*time.Second, func() bool {
		cond := meta.FindStatusCondition(getCluster(t, name).Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
		return cond != nil && strings.Contains(cond.Message, "no free credential in the pool") && strings.Contains(cond.Message, "gcp")
	})
	poolSecret(t, "gcp-free-1", map[string]string{cp.LabelHyperscalerType: "gcp"})
	waitCondition(t, name, conditions.Ready, metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound)
	s, err := getShoot(shoot.Name(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName"); got != "gcp-free-1" {
		t.Errorf("credentialsBindingName %q", got)
	}
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the dedicated Cluster to go", 30*time.Second, gone(mgmt.Client, c))
	pool := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gcp-free-1"}, pool); err != nil {
		t.Fatal(err)
	}
	if pool.Labels[cp.LabelTenantName] != "ga-42" || pool.Labels[cp.LabelDirty] != "true" {
		t.Errorf("released dedicated credential labels %v, want tenantName=ga-42 dirty=true", pool.Labels)
	}
}

func TestWithoutGarden(t *testing.T) {
	runOperators(t, false)
	c := gcpCluster("no-garden", "europe-west3")
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "no-garden", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonGardenNotConfigured)
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a never-provisioned Cluster to go", 30*time.Second, gone(mgmt.Client, c))
}
