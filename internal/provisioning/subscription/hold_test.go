package subscription

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// setHold sets (reason non-nil) or lifts the operator's hold on the pool of namespace ns.
func setHold(t *testing.T, ns string, reason *string) {
	t.Helper()
	value := "null"
	if reason != nil {
		value = fmt.Sprintf("%q", *reason)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, cp.AnnotationPoolHold, value)
	if err := env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// waitOnHold waits until the controller sees the pool held (want 1) or not (0), as its
// trustplane_pool_on_hold gauge says: it reads the same cache as the controller.
func waitOnHold(t *testing.T, want float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(poolInventory); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, fmt.Sprintf("trustplane_pool_on_hold %v", want), 30*time.Second, func() bool {
		v, ok := gather(t, reg)["trustplane_pool_on_hold{}"]
		return ok && v == want
	})
}

// reconciledNow asks for a reconcile of the request (the reconcile-request annotation)
// and waits until the controller has handled it.
func reconciledNow(t *testing.T, ns, name string) *cp.SubscriptionRequest {
	t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, conditions.ReconcileRequestedAnnotation, at)
	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Patch(ctx, sr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, name+" reconciled on request", 30*time.Second, func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr) == nil && sr.Status.LastHandledReconcileAt == at
	})
	return sr
}

// TestAHoldMakesClaimsAndReleasesWait: while the operator holds the pool, a new request
// claims nothing and a deleted one releases nothing: both wait with PoolOnHold, naming the
// operator's reason and how to lift the hold, with a Warning event. A request that has its
// credential keeps it through a reconcile. Lifting the hold lets both go on: the new
// request gets the free credential, and the deleted one's credential is marked dirty.
func TestAHoldMakesClaimsAndReleasesWait(t *testing.T) {
	ns := namespace(t)
	start(t, ns)
	credential(t, ns, "aws-1", map[string]string{"hyperscalerType": "aws"})
	credential(t, ns, "aws-2", map[string]string{"hyperscalerType": "aws"})
	request(t, ns, "kept", "aws", "globalaccount:acct1")
	kept := waitReason(t, ns, "kept", cp.ReasonAssigned).Status.GardenerSecretName
	free := map[string]string{"aws-1": "aws-2", "aws-2": "aws-1"}[kept]

	waitOnHold(t, 0)
	reason := "rotating the AWS accounts"
	setHold(t, ns, &reason)
	waitOnHold(t, 1)
	request(t, ns, "new", "aws", "globalaccount:acct2")
	sr := waitReason(t, ns, "new", cp.ReasonPoolOnHold)
	c := meta.FindStatusCondition(sr.Status.Conditions, conditions.Ready)
	for _, want := range []string{reason, "claiming a credential waits", "kubectl annotate namespace " + ns + " " + cp.AnnotationPoolHold + "-"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the held request says %q, want it to say %q", c.Message, want)
		}
	}
	if !meta.IsStatusConditionTrue(sr.Status.Conditions, conditions.Reconciling) || sr.Status.GardenerSecretName != "" {
		t.Errorf("the held request: %+v", sr.Status)
	}
	testenv.Eventually(t, "a Warning event PoolOnHold", 30*time.Second, func() bool {
		return len(testenv.WarningEvents(t, env.Client, ns, "new", cp.ReasonPoolOnHold)) > 0
	})
	if got := reconciledNow(t, ns, "kept"); got.Status.GardenerSecretName != kept || !meta.IsStatusConditionTrue(got.Status.Conditions, conditions.Ready) {
		t.Errorf("on hold, the assigned request lost its credential: %+v", got.Status)
	}

	if err := env.Client.Delete(ctx, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}); err != nil {
		t.Fatal(err)
	}
	deleted := waitReason(t, ns, "kept", cp.ReasonPoolOnHold)
	if msg := meta.FindStatusCondition(deleted.Status.Conditions, conditions.Ready).Message; !strings.Contains(msg, "releasing credential "+kept+" waits") {
		t.Errorf("the deleted request says %q", msg)
	}
	for name, s := range map[string]*corev1.Secret{kept: secret(t, ns, kept), free: secret(t, ns, free)} {
		if s.Labels["dirty"] != "" || (name == free && s.Labels["tenantName"] != "") {
			t.Errorf("on hold, %s was changed: %v", name, s.Labels)
		}
	}

	setHold(t, ns, nil)
	if got := waitReason(t, ns, "new", cp.ReasonAssigned).Status.GardenerSecretName; got != free {
		t.Errorf("after the hold the new request got %s, want %s", got, free)
	}
	testenv.Eventually(t, "the deleted request's credential released", 30*time.Second, func() bool {
		return secret(t, ns, kept).Labels["dirty"] == "true"
	})
}
