package security

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
	subscriptionctrl "github.com/trustplane/trustplane/internal/provisioning/subscription"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("drain the dedicated credential pool with made-up global accounts", drainThePool)
}

// drainRegion selects a regional pool of this case's own (hyperscalerType
// openstack_drain-test), so that no other case's request can take its credentials.
const drainRegion = "drain-test"

// drainThePool: alice asks for dedicated credentials for three global accounts nobody
// granted her namespace. Each request waits, saying what the operator would set; no
// credential of the pool is claimed, labelled or made dirty, and bob, whose namespace the
// operator granted an account, still gets one. Deleting her requests, one with a forged
// status naming a free credential, releases nothing.
func drainThePool(t *testing.T, alice *tenant) {
	// The shipped manager's Secret pool: the operator's namespace, default kcp-system.
	poolNamespace := subscriptionctrl.DefaultPoolNamespace
	mustCreate(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNamespace}})
	pool := make([]*corev1.Secret, 3)
	for i := range pool {
		pool[i] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: poolNamespace, Name: fmt.Sprintf("drain-%d", i+1),
			Labels: map[string]string{cp.LabelHyperscalerType: credentialpool.RegionalType("openstack", drainRegion)}},
			StringData: map[string]string{"credentials": "fake"}}
		mustCreate(t, env.Client, pool[i])
	}

	accounts := []string{"random-1", "random-2", "random-3"}
	for _, account := range accounts {
		mustCreate(t, alice.client, dedicatedRequest(alice.namespace, "drain-"+account, account))
	}
	for _, account := range accounts {
		waitsForGrant(t, alice, "drain-"+account, account)
	}
	for _, s := range pool {
		unchanged(t, s)
	}

	// Bob's namespace is granted his account by the operator: the pool still serves him.
	bob := newTenant(t, "bob", bobNamespace)
	grantAccount(t, bob.namespace, "ga-bob-drain")
	mustCreate(t, bob.client, dedicatedRequest(bob.namespace, "drain", "ga-bob-drain"))
	bobs := &cp.SubscriptionRequest{}
	testenv.Eventually(t, "bob's granted request to get a credential", 30*time.Second, func() bool {
		err := bob.client.Get(ctx, client.ObjectKey{Namespace: bob.namespace, Name: "drain"}, bobs)
		return err == nil && meta.IsStatusConditionTrue(bobs.Status.Conditions, "Ready")
	})
	if got := bobs.Status.GardenerSecretName; got != pool[0].Name {
		t.Errorf("bob got %q, want %s (the first free one)", got, pool[0].Name)
	}

	// A status forged to name a free credential (where admission lets her write status at
	// all), then every request deleted: nothing is released.
	forgeCredential(t, alice, "drain-random-1", pool[1].Name)
	for _, account := range accounts {
		sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "drain-" + account}}
		if err := alice.client.Delete(ctx, sr); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, sr.Name+" to go", 30*time.Second, func() bool {
			return apierrors.IsNotFound(alice.client.Get(ctx, client.ObjectKeyFromObject(sr), &cp.SubscriptionRequest{}))
		})
	}
	for _, s := range pool[1:] {
		unchanged(t, s)
	}
	if l := secretLabels(t, pool[0]); l[cp.LabelTenantName] != "ga-bob-drain" || l[cp.LabelDirty] != "" {
		t.Errorf("bob's credential after alice's requests went: labels %v", l)
	}
}

func dedicatedRequest(namespace, name, account string) *cp.SubscriptionRequest {
	return &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: cp.SubscriptionRequestSpec{Provider: "openstack", Region: drainRegion, SubscriptionSelector: "globalaccount:" + account}}
}

// waitsForGrant: the request has no credential and is Ready=False, reason
// GlobalAccountNotGranted, with a message naming the account, the namespace and the
// annotation that grants it.
func waitsForGrant(t *testing.T, alice *tenant, name, account string) {
	t.Helper()
	sr := &cp.SubscriptionRequest{}
	testenv.Eventually(t, name+" to wait for a grant of "+account, 30*time.Second, func() bool {
		if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name}, sr); err != nil {
			return false
		}
		c := meta.FindStatusCondition(sr.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == cp.ReasonGlobalAccountNotGranted
	})
	message := meta.FindStatusCondition(sr.Status.Conditions, "Ready").Message
	for _, want := range []string{"global account " + account, "namespace " + alice.namespace, cp.AnnotationGlobalAccounts} {
		if !strings.Contains(message, want) {
			t.Errorf("%s: message %q does not name %q", name, message, want)
		}
	}
	if sr.Status.GardenerSecretName != "" {
		t.Errorf("%s: assigned %q without a grant", name, sr.Status.GardenerSecretName)
	}
}

// grantAccount adds account to the grants of namespace, as the operator does.
func grantAccount(t *testing.T, namespace, account string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
			return err
		}
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Annotations[cp.AnnotationGlobalAccounts] = credentialpool.Grant(ns.Annotations[cp.AnnotationGlobalAccounts], account)
		return env.Client.Update(ctx, ns)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forgeCredential writes credential into the status of alice's request, as her RBAC lets
// her; an admission policy that keeps status to the manager may refuse it, which is as
// good.
func forgeCredential(t *testing.T, alice *tenant, name, credential string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sr := &cp.SubscriptionRequest{}
		if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name}, sr); err != nil {
			return err
		}
		sr.Status.GardenerSecretName = credential
		return alice.client.Status().Update(ctx, sr)
	})
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		t.Logf("alice may not write the status of %s: %v", name, err)
		return
	}
	if err != nil {
		t.Fatalf("alice forging the status of %s: %v", name, err)
	}
}

func secretLabels(t *testing.T, s *corev1.Secret) map[string]string {
	t.Helper()
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatal(err)
	}
	return got.Labels
}
