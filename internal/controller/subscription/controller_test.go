package subscription

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// namespace is a fresh namespace whose SubscriptionRequests go when the test ends: every
// manager watches requests of all namespaces, and one left behind would be reconciled by
// the next test's manager against that test's pool.
func namespace(t *testing.T) string {
	ns := env.Namespace(t, "pool")
	t.Cleanup(func() {
		list := &cp.SubscriptionRequestList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Error(err)
			return
		}
		for i := range list.Items {
			sr := &list.Items[i]
			_ = env.Client.Patch(ctx, sr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = client.IgnoreNotFound(env.Client.Delete(ctx, sr))
		}
	})
	return ns
}

func credential(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: map[string]string{"credentials": "x"}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func request(t *testing.T, ns, name, provider, selector string) {
	t.Helper()
	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cp.SubscriptionRequestSpec{Provider: provider, SubscriptionSelector: selector}}
	if err := env.Client.Create(ctx, sr); err != nil {
		t.Fatal(err)
	}
}

func waitReason(t *testing.T, ns, name, reason string) *cp.SubscriptionRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sr := &cp.SubscriptionRequest{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sr); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(sr.Status.Conditions, "Ready"); c != nil && c.Reason == reason {
			return sr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v", name, sr.Status)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T) *Reconciler {
	var r *Reconciler
	env.RunManager(t, func(mgr ctrl.Manager) (err error) { r, err = Setup(mgr); return err })
	return r
}

func TestSharedDedicatedReleaseAndEmptyPool(t *testing.T) {
	r := start(t)
	ns := namespace(t)
	credential(t, ns, "aws-shared-1", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	credential(t, ns, "aws-shared-2", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	credential(t, ns, "aws-a", map[string]string{"hyperscalerType": "aws"})
	credential(t, ns, "aws-b", map[string]string{"hyperscalerType": "aws"})

	// Shared: spread over the least used.
	used := map[string]int{}
	for i := range 4 {
		request(t, ns, fmt.Sprintf("trial-%d", i), "aws", "shared")
		used[waitReason(t, ns, fmt.Sprintf("trial-%d", i), cp.ReasonAssigned).Status.GardenerSecretName]++
	}
	if used["aws-shared-1"] != 2 || used["aws-shared-2"] != 2 {
		t.Errorf("shared usage %v, want 2 and 2", used)
	}
	// Dedicated: claimed for the global account, reused by its next request.
	request(t, ns, "acct1-a", "aws", "globalaccount:acct1")
	first := waitReason(t, ns, "acct1-a", cp.ReasonAssigned).Status.GardenerSecretName
	request(t, ns, "acct1-b", "aws", "acct1")
	if again := waitReason(t, ns, "acct1-b", cp.ReasonAssigned).Status.GardenerSecretName; again != first {
		t.Errorf("the same account got %s and %s", first, again)
	}
	if claimed := secret(t, ns, first); claimed.Labels["tenantName"] != "acct1" || string(claimed.Data["credentials"]) != "x" {
		t.Errorf("claimed credential: labels %v, credentials kept %v", claimed.Labels, string(claimed.Data["credentials"]) == "x")
	}
	// The pool cache holds labels only: no typed Secret (with its data) can be read from it.
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Pool.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, cached); err != nil || cached.Labels["tenantName"] != "acct1" {
		t.Errorf("the pool cache: %v, labels %v", err, cached.Labels)
	}
	if err := r.Pool.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, &corev1.Secret{}); err == nil {
		t.Error("the pool cache serves whole Secrets: credentials would be cached")
	}
	request(t, ns, "acct2", "aws", "globalaccount:acct2")
	second := waitReason(t, ns, "acct2", cp.ReasonAssigned).Status.GardenerSecretName
	if second == first {
		t.Fatal("two tenants share a dedicated credential")
	}
	// Release: dirty once its last request is gone.
	for _, name := range []string{"acct1-a", "acct1-b"} {
		if err := env.Client.Delete(ctx, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		if name == "acct1-a" {
			time.Sleep(500 * time.Millisecond)
			if secret(t, ns, first).Labels["dirty"] == "true" {
				t.Fatal("marked dirty while another request still uses it")
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for secret(t, ns, first).Labels["dirty"] != "true" {
		if time.Now().After(deadline) {
			t.Fatal("released credential not marked dirty")
		}
		time.Sleep(25 * time.Millisecond)
	}
	// Pool exhausted: a clear condition, recovered when a credential appears.
	request(t, ns, "acct3", "aws", "globalaccount:acct3")
	exhausted := waitReason(t, ns, "acct3", cp.ReasonPoolExhausted)
	if c := meta.FindStatusCondition(exhausted.Status.Conditions, "Ready"); c.Status != metav1.ConditionFalse {
		t.Errorf("condition %+v", c)
	}
	credential(t, ns, "aws-c", map[string]string{"hyperscalerType": "aws"})
	if got := waitReason(t, ns, "acct3", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-c" {
		t.Errorf("after the pool grew: %s", got)
	}
}

// TestNoCredentialIsClaimedTwice: 30 accounts at once, 30 free credentials, two manager
// instances racing (no leader election): every account gets its own credential. With the
// Secret pool, and with the garden's CredentialsBindings.
func TestNoCredentialIsClaimedTwice(t *testing.T) {
	t.Run("secrets", func(t *testing.T) {
		ns := namespace(t)
		for i := range 30 {
			credential(t, ns, fmt.Sprintf("gcp-%02d", i), map[string]string{"hyperscalerType": "gcp"})
		}
		start(t)
		start(t)
		claimRace(t, ns, func(name string) map[string]string { return secret(t, ns, name).Labels })
	})
	t.Run("garden", func(t *testing.T) {
		project, ns := gardenProject(t), namespace(t)
		for i := range 30 {
			binding(t, project, fmt.Sprintf("gcp-%02d", i), map[string]string{"hyperscalerType": "gcp"})
		}
		startGarden(t, project)
		startGarden(t, project)
		claimRace(t, ns, func(name string) map[string]string { return getBinding(t, project, name).GetLabels() })
	})
}

func claimRace(t *testing.T, ns string, labelsOf func(name string) map[string]string) {
	t.Helper()
	for i := range 30 {
		request(t, ns, fmt.Sprintf("acct-%02d", i), "gcp", fmt.Sprintf("globalaccount:acct-%02d", i))
	}
	owner := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("acct-%02d", i)
		got := waitReason(t, ns, name, cp.ReasonAssigned).Status.GardenerSecretName
		if other, taken := owner[got]; taken {
			t.Fatalf("%s assigned to %s and %s", got, other, name)
		}
		owner[got] = name
		if tenant := labelsOf(got)["tenantName"]; tenant != name {
			t.Errorf("%s labelled for %q, assigned to %s", got, tenant, name)
		}
	}
}
