// Package status tests that every trustplane kind reports its status the one way tools
// read it: `kubectl wait --for=condition=Ready` (the real kubectl) succeeds once an object
// is Ready, and kstatus (what Flux and Argo CD health checks use) computes Current for a
// Ready object, InProgress for one that waits, and Failed for one that is stalled. All four
// controllers run against one real API server, which is also the brought-along cluster.
package status_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	jwksctrl "github.com/trustplane/trustplane/internal/jwks"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	subscriptionctrl "github.com/trustplane/trustplane/internal/provisioning/subscription"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

// runControllers starts the four controllers (no garden: Clusters are brought along) and
// gives the test a fresh namespace.
func runControllers(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "status-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// No kube-controller-manager or kubelet: a stand-in rolls the nginx Deployments out.
	env.RollOutDeployments(t, jwksv1alpha1.OwnerLabel)
	env.RunManager(t, func(mgr ctrl.Manager) error {
		jwksOpts := jwksctrl.DefaultOptions()
		jwksOpts.ServerBindAddress = "0"
		if _, err := jwksctrl.Setup(mgr, jwksOpts); err != nil {
			return err
		}
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		if _, err := clusterctrl.Setup(mgr, clusterctrl.DefaultOptions()); err != nil {
			return err
		}
		// The test's pool Secrets are in its namespace: the operator's pool, here.
		if _, err := subscriptionctrl.Setup(mgr, subscriptionctrl.Options{Pool: subscriptionctrl.PoolSecrets, PoolNamespace: ns.Name}); err != nil {
			return err
		}
		_, err := kubeconfigctrl.Setup(mgr, kubeconfigctrl.DefaultOptions())
		return err
	})
	return ns.Name
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// kubectl runs the real kubectl against the test API server.
func kubectl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(testenv.RepoRoot(), "bin", "k8s")
	}
	args = append([]string{"--kubeconfig", env.AdminKubeconfig(t), "--cache-dir", t.TempDir()}, args...)
	return testenv.RunCommand(t, filepath.Join(assets, "kubectl"), args...)
}

// kstatusOf is what kstatus computes for the stored object.
func kstatusOf(t *testing.T, obj client.Object) *kstatus.Result {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitKstatus waits until kstatus computes want for obj.
func waitKstatus(t *testing.T, obj client.Object, want kstatus.Status) *kstatus.Result {
	t.Helper()
	var res *kstatus.Result
	testenv.Eventually(t, fmt.Sprintf("kstatus %s for %T %s", want, obj, obj.GetName()), 60*time.Second, func() bool {
		res = kstatusOf(t, obj)
		return res.Status == want
	})
	return res
}

// resourceName is how kubectl names obj unambiguously: <plural>.<group>/<name>.
func resourceName(t *testing.T, obj client.Object) string {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := env.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	return mapping.Resource.Resource + "." + gvk.Group + "/" + obj.GetName()
}

// TestKubectlWaitsForEveryKindToBeReady: one object of each kind, each able to become
// Ready; `kubectl wait --for=condition=Ready` returns for each, and kstatus says Current.
func TestKubectlWaitsForEveryKindToBeReady(t *testing.T) {
	ns := runControllers(t)
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rules := []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer-tls"}, Data: map[string][]byte{corev1.TLSCertKey: chain.PEM()}},
		// This API server is also the brought-along cluster.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-1", Labels: map[string]string{cp.LabelHyperscalerType: "aws", cp.LabelShared: "true"}}},
	)
	objs := []client.Object{
		&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls"}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self"}, Spec: operatorv1alpha1.ClusterSpec{
			KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "self-admin"}, Administrators: []string{"admin@example.com"}}},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{
			Cluster: "self", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: rules}}},
		&cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trial"}, Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}},
	}
	create(t, objs...)
	for _, obj := range objs {
		name := resourceName(t, obj)
		stdout, stderr, code := kubectl(t, "wait", "--for=condition=Ready", "--namespace", ns, name, "--timeout=60s")
		if code != 0 || !strings.Contains(stdout, "condition met") {
			t.Errorf("kubectl wait %s: exit %d\n%s%s", name, code, stdout, stderr)
			continue
		}
		if res := kstatusOf(t, obj); res.Status != kstatus.CurrentStatus {
			t.Errorf("kstatus of %s: %s (%s)", name, res.Status, res.Message)
		}
	}
}

// TestKstatusSeesWaitingAndStalled: for each kind, an object that waits for something
// is InProgress with the waiting reason, and one that cannot progress is Failed.
func TestKstatusSeesWaitingAndStalled(t *testing.T) {
	ns := runControllers(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken-admin"}, Data: map[string][]byte{"kubeconfig": []byte("clusters: [not a kubeconfig")}})
	escalate := []operatorv1alpha1.PolicyRule{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}}
	for _, tc := range []struct {
		obj    client.Object
		status kstatus.Status
		reason string
	}{
		{&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-secret"}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "not-yet"}},
			kstatus.InProgressStatus, jwksv1alpha1.ReasonSecretNotFound},
		{&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}, Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "not-yet"}}},
			kstatus.InProgressStatus, operatorv1alpha1.ReasonKubeconfigMissing},
		{&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}, Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "broken-admin"}}},
			kstatus.FailedStatus, operatorv1alpha1.ReasonKubeconfigInvalid},
		{&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{
			Cluster: "nowhere", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: "team", Rules: []operatorv1alpha1.PolicyRule{{Resources: []string{"pods"}, Verbs: []string{"get"}}}}}},
			kstatus.InProgressStatus, operatorv1alpha1.ReasonClusterNotReady},
		{&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escalator"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{
			Cluster: "nowhere", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: escalate}}},
			kstatus.FailedStatus, operatorv1alpha1.ReasonDenied},
		{&cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty-pool"}, Spec: cp.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "shared"}},
			kstatus.InProgressStatus, cp.ReasonPoolExhausted},
	} {
		create(t, tc.obj)
		waitReason(t, tc.obj, tc.reason)
		res := waitKstatus(t, tc.obj, tc.status)
		if tc.status == kstatus.InProgressStatus && !hasCondition(res, kstatus.ConditionReconciling, tc.reason) ||
			tc.status == kstatus.FailedStatus && !hasCondition(res, kstatus.ConditionStalled, tc.reason) {
			t.Errorf("%s: kstatus %s with conditions %+v, want the reason %s", tc.obj.GetName(), res.Status, res.Conditions, tc.reason)
		}
	}
}

// waitReason waits until obj's Ready condition has the reason.
func waitReason(t *testing.T, obj client.Object, reason string) {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, fmt.Sprintf("%s Ready reason %s", obj.GetName(), reason), 60*time.Second, func() bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["reason"] == reason {
				return true
			}
		}
		return false
	})
}

func hasCondition(res *kstatus.Result, conditionType kstatus.ConditionType, reason string) bool {
	for _, c := range res.Conditions {
		if c.Type == conditionType && c.Reason == reason {
			return true
		}
	}
	return false
}
