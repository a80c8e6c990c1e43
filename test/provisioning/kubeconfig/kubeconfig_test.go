// Package kubeconfig_test tests the Kubeconfig operator with two real API servers: the
// management cluster holding KubeconfigRequests and a brought-along target cluster. The
// issued kubeconfigs are used for real requests against the target.
package kubeconfig_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/manager"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	mgmt, target *testenv.Env
	ctx          = context.Background()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	// The manager's assembly registers what each controller collects; here, the suite does.
	if err := manager.RegisterMetrics(append(append(status.Metrics(), kubeconfigctrl.Collectors()...), clusterctrl.Collectors()...)...); err != nil {
		panic(err)
	}
	auditDir, err := os.MkdirTemp("", "kubeconfig-target-audit-")
	if err != nil {
		panic(err)
	}
	audit, err := withAuditLog(auditDir)
	if err != nil {
		panic(err)
	}
	if target, err = testenv.Start(audit...); err != nil {
		panic(err)
	}
	code := testenv.Main(m, &mgmt)
	_ = target.Stop()
	_ = os.RemoveAll(auditDir)
	os.Exit(code)
}

const ns = "default"

// setup starts the controller (stop ends it early) and brings along the target cluster.
func setup(t *testing.T) (stop func()) {
	t.Helper()
	stop = runController(t)
	createTarget(t)
	return stop
}

// createTarget brings along the target cluster as Cluster default/target.
func createTarget(t *testing.T) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "target-admin"}}}
	for _, obj := range []client.Object{secret, cluster} {
		if err := mgmt.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	if err := target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func runController(t *testing.T) (stop func()) {
	return mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		_, err := kubeconfigctrl.Setup(mgr, kubeconfigctrl.DefaultOptions())
		return err
	})
}

func waitReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(kr.Status.Conditions, "Ready")
		if c != nil && c.Status == status && c.Reason == reason {
			return kr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: conditions %+v", name, kr.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// issuedConfig is the REST config of the kubeconfig the request publishes.
func issuedConfig(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) *rest.Config {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clientFrom builds a client for the target from an issued kubeconfig.
func clientFrom(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(issuedConfig(t, kr))
}

func TestKubeconfigLifecycle(t *testing.T) {
	setup(t)
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			Role:        &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"get", "list"}}}},
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	kr = waitReady(t, "reader", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	if kr.Status.ExpirationTimestamp == nil || time.Until(kr.Status.ExpirationTimestamp.Time) > time.Hour+time.Minute || time.Until(kr.Status.ExpirationTimestamp.Time) < 50*time.Minute {
		t.Errorf("expirationTimestamp %v", kr.Status.ExpirationTimestamp)
	}
	secret := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kr.Status.SecretName}, secret); err != nil || base64.StdEncoding.EncodeToString(secret.Data["kubeconfig"]) != kr.Status.Kubeconfig {
		t.Fatalf("kubeconfig Secret: %v", err)
	}

	// Exactly what the rules allow, nothing else — checked with real requests.
	// The target authorizes from an informer-fed cache that trails the RBAC writes a little.
	kc := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig to list pods in team and namespaces", 10*time.Second, func() bool {
		_, podsErr := kc.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		_, nsErr := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return podsErr == nil && nsErr == nil
	})
	for what, call := range map[string]func() error{
		"list pods in default": func() error { _, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); return err },
		"list secrets in team": func() error { _, err := kc.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); return err },
		"create a configmap": func() error {
			_, err := kc.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"delete a namespace": func() error { return kc.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}) },
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}

	// Rotation on request: a new token, the annotation reset.
	old := kr.Status.Kubeconfig
	patchAnnotation(t, "reader", operatorv1alpha1.RotateAnnotation, "true")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			t.Fatal(err)
		}
		if kr.Status.Kubeconfig != "" && kr.Status.Kubeconfig != old && kr.Annotations[operatorv1alpha1.RotateAnnotation] == "false" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not rotated")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rotated := clientFrom(t, kr)
	if _, err := rotated.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("rotated kubeconfig: %v", err)
	}

	// Revoke: the token is rejected by the target at once and the status is cleared.
	patchAnnotation(t, "reader", operatorv1alpha1.RevokeAnnotation, "true")
	kr = waitReady(t, "reader", metav1.ConditionFalse, operatorv1alpha1.ReasonRevoked)
	if kr.Status.Kubeconfig != "" || kr.Status.ExpirationTimestamp != nil {
		t.Errorf("status not cleared: %+v", kr.Status)
	}
	// kube-apiserver caches successful token authentications for 10 s, so a token used
	// just before the revocation may pass until that entry ages out; then it is rejected.
	for i, c := range []kubernetes.Interface{kc, rotated} {
		start := time.Now()
		for {
			_, err := c.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
			if apierrors.IsUnauthorized(err) {
				t.Logf("token %d rejected %v after the revocation was recorded", i, time.Since(start).Round(time.Millisecond))
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("revoked token %d still accepted: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reader-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("kubeconfig Secret after revoke: %v", err)
	}

	// Deletion removes everything in the target.
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		sas := &corev1.ServiceAccountList{}
		_ = target.Client.List(ctx, sas, client.InNamespace(kubeconfigctrl.TargetNamespace), client.HasLabels{kubeconfigctrl.RequestLabel})
		crbs := &rbacv1.ClusterRoleBindingList{}
		_ = target.Client.List(ctx, crbs, client.HasLabels{kubeconfigctrl.RequestLabel})
		roles := &rbacv1.RoleList{}
		_ = target.Client.List(ctx, roles, client.InNamespace("team"), client.HasLabels{kubeconfigctrl.RequestLabel})
		gone := apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr))
		if gone && len(sas.Items)+len(crbs.Items)+len(roles.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the target: %d SAs, %d CRBs, %d Roles (request gone: %v)", len(sas.Items), len(crbs.Items), len(roles.Items), gone)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func patchAnnotation(t *testing.T, name, key, value string) {
	t.Helper()
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	raw := `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`
	if err := mgmt.Client.Patch(ctx, kr, client.RawPatch("application/merge-patch+json", []byte(raw))); err != nil {
		t.Fatal(err)
	}
}

func TestCeilingDenies(t *testing.T) {
	setup(t)
	for name, rule := range map[string]operatorv1alpha1.PolicyRule{
		"escalator":     {APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}},
		"secret-reader": {APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
	} {
		kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{rule}}}}
		if err := mgmt.Client.Create(ctx, kr); err != nil {
			t.Fatal(err)
		}
		kr = waitReady(t, name, metav1.ConditionFalse, operatorv1alpha1.ReasonDenied)
		if kr.Status.Kubeconfig != "" {
			t.Errorf("%s: a kubeconfig was issued", name)
		}
	}
}

// TestSeedsMalformedExampleIsRejected: the seed's example with a versioned API group,
// capitalised kinds as resources, and an unquoted boolean annotation.
func TestSeedsMalformedExampleIsRejected(t *testing.T) {
	apply := func(doc string) error {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		return mgmt.Client.Create(ctx, obj)
	}
	err := apply(`apiVersion: operator.kyma-project.io/v1alpha1
kind: KubeconfigRequest
metadata: {name: seed-example, namespace: default}
spec:
  cluster: target
  clusterRole:
    rules:
    - apiGroups: ["operator.kyma-project.io/v1alpha1"]
      resources: ["Application", "Secret"]
      verbs: ["get", "list"]
  expiration: 3600`)
	if err == nil || !strings.Contains(err.Error(), "apiGroups are API groups without a version") || !strings.Contains(err.Error(), "resources are lower-case plural resource names") {
		t.Errorf("versioned group / capitalised kinds: %v", err)
	}
	err = apply(`apiVersion: operator.kyma-project.io/v1alpha1
kind: KubeconfigRequest
metadata:
  name: seed-rotate
  namespace: default
  annotations:
    operator.kyma-project.io/rotate: true
spec:
  cluster: target
  role: {namespace: team, rules: [{apiGroups: [""], resources: ["pods"], verbs: ["get"]}]}`)
	if err == nil || !strings.Contains(err.Error(), "annotations") {
		t.Errorf("unquoted boolean annotation: %v", err)
	}
}

// TestUnreachableTargetSaysSoAndKeepsEverything: the Cluster's kubeconfig points nowhere.
func TestUnreachableTargetSaysSoAndKeepsEverything(t *testing.T) {
	setup(t)
	dead := testenv.FreeAddr(t)
	parsed, err := clientcmd.Load(target.Environment().KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parsed.Clusters {
		c.Server = "https://" + dead
	}
	cfg, err := clientcmd.Write(*parsed)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dead-admin"}, Data: map[string][]byte{"kubeconfig": cfg}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dead"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "dead-admin"}}}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unreachable"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "dead", Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	for _, obj := range []client.Object{secret, cluster, kr} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	kr = waitReady(t, "unreachable", metav1.ConditionFalse, operatorv1alpha1.ReasonTargetUnreachable)
	if c := meta.FindStatusCondition(kr.Status.Conditions, "Ready"); !strings.Contains(c.Message, "cluster dead") {
		t.Errorf("message %q", c.Message)
	}
	for _, obj := range []client.Object{secret, cluster} {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T deleted: %v", obj, err)
		}
	}
}

// TestSomeoneElsesSecretIsNeverTaken: a Secret of the published name that the request does
// not control (here: a user's credential) is neither overwritten nor deleted on revoke.
func TestSomeoneElsesSecretIsNeverTaken(t *testing.T) {
	setup(t)
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("the user's own")}}
	if err := mgmt.Client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	kr = waitReady(t, "taken", metav1.ConditionFalse, operatorv1alpha1.ReasonSecretNameTaken)
	if kr.Status.Kubeconfig != "" {
		t.Error("a kubeconfig was issued without a place to publish it")
	}
	patch := client.MergeFrom(kr.DeepCopy())
	kr.Annotations = map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}
	if err := mgmt.Client.Patch(ctx, kr, patch); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "taken", metav1.ConditionFalse, operatorv1alpha1.ReasonRevoked)
	got := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(users), got); err != nil || string(got.Data["kubeconfig"]) != "the user's own" || len(got.OwnerReferences) != 0 {
		t.Fatalf("the user's Secret was touched: %v %+v", err, got)
	}
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr))
	})
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(users), got); err != nil {
		t.Fatalf("the user's Secret went with the request: %v", err)
	}
}

// TestClusterGoingWithItsKubeconfig: the namespace is being deleted, so the Cluster is
// going (held by its finalizer) and its kubeconfig Secret is already gone. A request still
// cleans up through the connection it has; with none left (a restarted operator) it lets
// go with a warning rather than hold the Cluster and the namespace for ever.
func TestClusterGoingWithItsKubeconfig(t *testing.T) {
	stop := setup(t)
	const hold = "test.trustplane.io/hold" // stands in for the cluster controller's finalizer
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed", Finalizers: []string{hold}},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "doomed-admin"}}}
	request := func(name string) *operatorv1alpha1.KubeconfigRequest {
		kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "doomed", Expiration: 3600,
				Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
		if err := mgmt.Client.Create(ctx, kr); err != nil {
			t.Fatal(err)
		}
		return kr
	}
	for _, obj := range []client.Object{secret, cluster} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		cluster.Finalizers = nil
		_ = mgmt.Client.Update(ctx, cluster)
	})
	connected, stranded := request("connected"), request("stranded")
	waitReady(t, "connected", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	waitReady(t, "stranded", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	for _, obj := range []client.Object{cluster, secret} {
		if err := mgmt.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	goes := func(kr *operatorv1alpha1.KubeconfigRequest) {
		t.Helper()
		if err := mgmt.Client.Delete(ctx, kr); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, kr.Name+" to go", 30*time.Second, func() bool {
			return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), &operatorv1alpha1.KubeconfigRequest{}))
		})
	}
	goes(connected)
	sas := &corev1.ServiceAccountList{}
	if err := target.Client.List(ctx, sas, client.InNamespace(kubeconfigctrl.TargetNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, sa := range sas.Items {
		if strings.HasPrefix(sa.Name, "kcr-default-connected-") {
			t.Errorf("the connection it had did not clean up the target: %s is left", sa.Name)
		}
	}

	stop()
	runController(t) // no connection any more, and no kubeconfig to make one
	goes(stranded)
	testenv.Eventually(t, "a TargetNotCleanedUp warning for what stays in the target", 30*time.Second, func() bool {
		list := &eventsv1.EventList{}
		_ = mgmt.Client.List(ctx, list, client.InNamespace(ns))
		for _, e := range list.Items {
			if e.Regarding.Name == "stranded" && e.Reason == "TargetNotCleanedUp" && e.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
}

// roleRequest is a KubeconfigRequest for get on pods in the target's namespace "team".
func roleRequest(namespace, name, cluster string) *operatorv1alpha1.KubeconfigRequest {
	return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
}

func createAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// waitConditions waits until the request's conditions, as "Type=Status/Reason", are
// exactly want, for its current generation.
func waitConditions(t *testing.T, namespace, name string, want ...string) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	slices.Sort(want)
	var kr *operatorv1alpha1.KubeconfigRequest
	deadline := time.Now().Add(30 * time.Second)
	for {
		kr = &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kr); err != nil {
			t.Fatal(err)
		}
		var got []string
		current := true
		for _, c := range kr.Status.Conditions {
			current = current && c.ObservedGeneration == kr.Generation
			got = append(got, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		slices.Sort(got)
		if current && slices.Equal(got, want) {
			return kr
		}
		if time.Now().After(deadline) {
			// The conditions say why, with their messages.
			t.Fatalf("%s/%s conditions %v, want %v for generation %d: %+v", namespace, name, got, want, kr.Generation, kr.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func warningEvents(t *testing.T, namespace, name, reason string) []eventsv1.Event {
	return testenv.WarningEvents(t, mgmt.Client, namespace, name, reason)
}

// refusedSecretCreates counts the management API server's 403 answers to Secret creates.
func refusedSecretCreates(t *testing.T) int {
	t.Helper()
	n, err := testenv.APIRequests(ctx, mgmt.Config, func(labels string) bool {
		return strings.Contains(labels, `resource="secrets"`) && strings.Contains(labels, `verb="POST"`) && strings.Contains(labels, `code="403"`)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQuotaOnThePublishedSecretIsReportedAndRecovers: a ResourceQuota leaves no room for
// the kubeconfig Secret. The request says so (Stalled, Ready=False, reason QuotaExceeded,
// naming the Secret and the quota) with one Warning event however often it is retried,
// leaves no token behind per attempt, and is issued once the quota allows it.
func TestQuotaOnThePublishedSecretIsReportedAndRecovers(t *testing.T) {
	setup(t)
	const quotaNS = "quota"
	createAll(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: quotaNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "target-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "target"},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "target-admin"}}})
	// No quota controller runs here: the test writes the usage it would have computed.
	full := corev1.ResourceList{corev1.ResourceSecrets: resource.MustParse("1")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "secrets"}, Spec: corev1.ResourceQuotaSpec{Hard: full}}
	createAll(t, quota)
	quota.Status = corev1.ResourceQuotaStatus{Hard: full, Used: full}
	if err := mgmt.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the quota in force", 30*time.Second, func() bool {
		return mgmt.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "probe"}}, client.DryRunAll) != nil
	})

	createAll(t, roleRequest(quotaNS, "over", "target"))
	kr := waitConditions(t, quotaNS, "over", "Ready=False/QuotaExceeded", "Stalled=True/QuotaExceeded")
	msg := meta.FindStatusCondition(kr.Status.Conditions, "Ready").Message
	for _, want := range []string{"create Secret quota/over-kubeconfig: ", "exceeded quota: secrets"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q lacks %q", msg, want)
		}
	}
	if kr.Status.Kubeconfig != "" {
		t.Error("a kubeconfig in the status that was never published")
	}
	testenv.Eventually(t, "a QuotaExceeded event", 30*time.Second, func() bool { return len(warningEvents(t, quotaNS, "over", "QuotaExceeded")) > 0 })
	refused := refusedSecretCreates(t)
	testenv.Eventually(t, "three more refused creates", 30*time.Second, func() bool { return refusedSecretCreates(t) >= refused+3 })
	if got := warningEvents(t, quotaNS, "over", "QuotaExceeded"); len(got) != 1 || got[0].Series != nil {
		t.Errorf("%d QuotaExceeded events (%+v), want one recorded once", len(got), got)
	}

	if err := mgmt.Client.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	kr = waitConditions(t, quotaNS, "over", "Ready=True/Issued")
	if kr.Status.Kubeconfig == "" || kr.Status.ObservedGeneration != kr.Generation {
		t.Errorf("issued status %+v", kr.Status)
	}
	// Each refused attempt had its token binding deleted: only the issued one is left.
	bindings := &corev1.SecretList{}
	if err := target.Client.List(ctx, bindings, client.InNamespace(kubeconfigctrl.TargetNamespace), client.HasLabels{kubeconfigctrl.RequestLabel}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range bindings.Items {
		if strings.HasPrefix(b.Labels[kubeconfigctrl.RequestLabel], "kcr-quota-over-") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d token bindings in the target, want the issued one", n)
	}
}

// TestSecretNameTakenRecoversWhenTheSecretGoes: a request stalled on someone else's Secret
// is brought back by that Secret's deletion (no retry loop, no change to the request).
func TestSecretNameTakenRecoversWhenTheSecretGoes(t *testing.T) {
	setup(t)
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reclaimed-kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("the user's own")}}
	createAll(t, users, roleRequest(ns, "reclaimed", "target"))
	kr := waitConditions(t, ns, "reclaimed", "Ready=False/SecretNameTaken", "Stalled=True/SecretNameTaken")
	if kr.Status.ObservedGeneration != kr.Generation {
		t.Errorf("observedGeneration %d of a stalled generation %d", kr.Status.ObservedGeneration, kr.Generation)
	}
	if err := mgmt.Client.Delete(ctx, users); err != nil {
		t.Fatal(err)
	}
	kr = waitConditions(t, ns, "reclaimed", "Ready=True/Issued")
	if kr.Generation != 1 || kr.Status.Kubeconfig == "" {
		t.Errorf("generation %d, status %+v", kr.Generation, kr.Status)
	}
}

// TestWaitsForTheClustersKubeconfigSecret: a brought-along Cluster whose kubeconfig Secret
// is not there yet keeps its requests Reconciling (ClusterNotReady) until it appears; the
// Secret's creation brings them back, with no Cluster controller running to relay it.
func TestWaitsForTheClustersKubeconfigSecret(t *testing.T) {
	setup(t)
	createAll(t, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "late-admin"}}},
		roleRequest(ns, "patient", "late"))
	kr := waitConditions(t, ns, "patient", "Ready=False/ClusterNotReady", "Reconciling=True/ClusterNotReady")
	if c := meta.FindStatusCondition(kr.Status.Conditions, "Ready"); !strings.Contains(c.Message, "late-admin") {
		t.Errorf("Ready message %q does not name the Secret", c.Message)
	}
	if kr.Status.ObservedGeneration != 0 {
		t.Errorf("observedGeneration %d while waiting", kr.Status.ObservedGeneration)
	}
	createAll(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}})
	kr = waitConditions(t, ns, "patient", "Ready=True/Issued")
	if kr.Status.ObservedGeneration != kr.Generation {
		t.Errorf("observedGeneration %d once issued", kr.Status.ObservedGeneration)
	}
}
