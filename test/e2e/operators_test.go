package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

const operatorsNamespace = "e2e-operators"

// testOperatorsReport: the manager's cluster, kubeconfig and subscription controllers,
// under its own ServiceAccount, serve a brought-along Cluster (this API server), issue a
// kubeconfig for it, and keep a SubscriptionRequest waiting on the empty Secret pool; a
// Secret with an unusable version is left out of the checksums. Their series are what
// the alerts and the dashboard read (testQueriedMetricsAreExported).
func testOperatorsReport(t *testing.T) {
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorsNamespace}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "target-admin"},
		Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}})
	create(t, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "target"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "target-admin"}}})
	create(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}})
	create(t, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "waiting"},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorsNamespace, Name: "unversioned-tls-1",
		Annotations: map[string]string{checksum.DefaultVersionAnnotation: "not-a-number"}}, Type: corev1.SecretTypeOpaque})

	ready := func(obj interface {
		client.Object
		GetConditions() []metav1.Condition
	}, condition, reason string) func() bool {
		return func() bool {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false
			}
			c := meta.FindStatusCondition(obj.GetConditions(), condition)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}
	at := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: operatorsNamespace, Name: name}
	}
	testenv.Eventually(t, "the brought-along Cluster Ready", 60*time.Second,
		ready(&operatorv1alpha1.Cluster{ObjectMeta: at("target")}, conditions.Ready, operatorv1alpha1.ReasonAdministratorsBound))
	testenv.Eventually(t, "the kubeconfig issued", 60*time.Second,
		ready(&operatorv1alpha1.KubeconfigRequest{ObjectMeta: at("reader")}, conditions.Ready, operatorv1alpha1.ReasonIssued))
	testenv.Eventually(t, "the SubscriptionRequest waiting on the empty pool", 60*time.Second,
		ready(&cp.SubscriptionRequest{ObjectMeta: at("waiting")}, conditions.Reconciling, cp.ReasonPoolExhausted))
	revokeOneCredential(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: at("reader")})
	for _, obj := range []conditions.Object{&operatorv1alpha1.Cluster{ObjectMeta: at("target")},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: at("reader")}, &cp.SubscriptionRequest{ObjectMeta: at("waiting")}} {
		writeStatusFromStaleRead(t, obj)
	}
}

// revokeOneCredential: the issued credential is listed by the ID the API server gives its
// token (TokenReview says the same); revoking it by that ID issues a new kubeconfig, and
// the API server refuses the old token.
func revokeOneCredential(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
		t.Fatal(err)
	}
	if len(kr.Status.Credentials) != 1 {
		t.Fatalf("credentials listed: %+v", kr.Status.Credentials)
	}
	old, oldKubeconfig := kr.Status.Credentials[0].ID, kr.Status.Kubeconfig
	if _, id := testenv.ReviewKubeconfigToken(t, env.Client, oldKubeconfig); id != old || !strings.HasPrefix(id, "JTI=") {
		t.Fatalf("listed as %q, the API server names the token %q", old, id)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, operatorv1alpha1.RevokeCredentialAnnotation, old)
	if err := env.Client.Patch(ctx, kr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a new credential for the revoked one", 60*time.Second, func() bool {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			return false
		}
		return kr.Status.LastHandledRevokeCredential == old && len(kr.Status.Credentials) == 1 && kr.Status.Credentials[0].ID != old &&
			meta.IsStatusConditionTrue(kr.Status.Conditions, conditions.Ready)
	})
	testenv.Eventually(t, "the revoked token refused", 30*time.Second, func() bool {
		user, _ := testenv.ReviewKubeconfigToken(t, env.Client, oldKubeconfig)
		return user == ""
	})
	if _, id := testenv.ReviewKubeconfigToken(t, env.Client, kr.Status.Kubeconfig); id != kr.Status.Credentials[0].ID {
		t.Errorf("the new credential: listed %q, the API server says %q", kr.Status.Credentials[0].ID, id)
	}
}

// poolNamespace is the manifests' --subscription-pool-namespace: the Secret pool's, and
// where the operator's hold is set.
const poolNamespace = "kcp-system"

// testPoolHeld: the manager as deployed, with the Secret pool of the manifests. While the
// operator holds the pool, a granted request claims nothing (PoolOnHold, a Warning event)
// and trustplane_pool_on_hold is 1; lifted, the request claims a credential; deleted, its
// credential is marked dirty. The pool's inventory metrics count each step, as scraped
// with the shipped metrics reader's token.
func testPoolHeld(t *testing.T, managerMetrics string) {
	const tenantNamespace, account = "e2e-pool", "ga-e2e"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNamespace,
		Annotations: map[string]string{cp.AnnotationPoolHold: "e2e maintenance"}}})
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace,
		Annotations: map[string]string{cp.AnnotationGlobalAccounts: account}}})
	for _, name := range []string{"gcp-e2e-1", "gcp-e2e-2"} {
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: poolNamespace, Name: name,
			Labels: map[string]string{cp.LabelHyperscalerType: "gcp"}}, StringData: map[string]string{"credentials": "fake"}})
	}
	series := func(want map[string]float64) {
		t.Helper()
		var exposition []byte
		testenv.Eventually(t, fmt.Sprintf("the pool's series %v", want), 30*time.Second, func() bool {
			exposition = scrapeSecure(t, managerMetrics)
			for s, v := range want {
				if got, ok := seriesValue(exposition, s); !ok || got != v {
					return false
				}
			}
			return true
		})
		t.Logf("scraped: %s", strings.Join(poolSeries(exposition), "; "))
	}
	series(map[string]float64{`trustplane_pool_on_hold`: 1, `trustplane_pool_available_credentials{hyperscaler_type="gcp"}`: 2})

	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "held"},
		Spec: cp.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "globalaccount:" + account}}
	create(t, sr)
	testenv.Eventually(t, "the request waiting on the hold", 60*time.Second, func() bool {
		c := conditionOf(t, sr, conditions.Reconciling)
		return c != nil && c.Reason == cp.ReasonPoolOnHold && strings.Contains(c.Message, "e2e maintenance") &&
			len(testenv.WarningEvents(t, env.Client, tenantNamespace, sr.Name, cp.ReasonPoolOnHold)) > 0
	})

	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: poolNamespace}, ns); err != nil {
		t.Fatal(err)
	}
	delete(ns.Annotations, cp.AnnotationPoolHold)
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request assigned once the hold is lifted", 60*time.Second, func() bool {
		c := conditionOf(t, sr, conditions.Ready)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == cp.ReasonAssigned
	})
	claimed := sr.Status.GardenerSecretName
	series(map[string]float64{`trustplane_pool_on_hold`: 0, `trustplane_pool_available_credentials{hyperscaler_type="gcp"}`: 1,
		`trustplane_pool_claimed_credentials{hyperscaler_type="gcp",tenant_name="` + account + `"}`: 1,
		`trustplane_pool_instances_per_credential{credential="` + claimed + `"}`:                    1})

	if err := env.Client.Delete(ctx, sr); err != nil {
		t.Fatal(err)
	}
	series(map[string]float64{`trustplane_pool_dirty_credentials{hyperscaler_type="gcp"}`: 1,
		`trustplane_pool_available_credentials{hyperscaler_type="gcp"}`: 1})
	credential := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: poolNamespace, Name: claimed}, credential); err != nil || credential.Labels[cp.LabelDirty] != "true" {
		t.Errorf("the released credential %s: %v, labels %v", claimed, err, credential.Labels)
	}
}

// conditionOf reads obj again and returns its condition typ.
func conditionOf(t *testing.T, sr *cp.SubscriptionRequest, typ string) *metav1.Condition {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(sr.Status.Conditions, typ)
}

// seriesValue is the value of series (name{labels} as the exposition writes it) in a
// Prometheus text exposition.
func seriesValue(exposition []byte, series string) (float64, bool) {
	for _, line := range strings.Split(string(exposition), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// poolSeries are the trustplane_pool_* series of an exposition.
func poolSeries(exposition []byte) []string {
	var out []string
	for _, line := range strings.Split(string(exposition), "\n") {
		if strings.HasPrefix(line, "trustplane_pool_") {
			out = append(out, line)
		}
	}
	return out
}
