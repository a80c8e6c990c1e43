package subscription

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// grant lets the requests of namespace ns claim dedicated credentials for accounts, as the
// operator does: the annotation on the Namespace.
func grant(t *testing.T, ns, accounts string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cp.AnnotationGlobalAccounts, accounts)
	if err := env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
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

// start runs the controller with the Secret pool in poolNamespace.
func start(t *testing.T, poolNamespace string) *Reconciler {
	var r *Reconciler
	env.RunManager(t, func(mgr ctrl.Manager) (err error) {
		r, err = Setup(mgr, Options{Pool: PoolSecrets, PoolNamespace: poolNamespace})
		return err
	})
	return r
}

func TestSharedDedicatedReleaseAndEmptyPool(t *testing.T) {
	ns := namespace(t) // the pool's namespace, and the requests' (an operator's own)
	r := start(t, ns)
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
	if c := meta.FindStatusCondition(exhausted.Status.Conditions, "Ready"); c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, fmt.Sprintf("in the secrets of namespace %q", ns)) || !strings.Contains(c.Message, "hyperscalerType=aws") {
		t.Errorf("condition %+v does not say where the pool is and what a credential needs", c)
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
		start(t, ns)
		start(t, ns)
		claimRace(t, ns, func(name string) map[string]string { return secret(t, ns, name).Labels })
	})
	t.Run("garden", func(t *testing.T) {
		project, ns := gardenProject(t), namespace(t)
		for i := range 30 {
			binding(t, project, fmt.Sprintf("gcp-%02d", i), map[string]string{"hyperscalerType": "gcp"})
		}
		grant(t, ns, "*")
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

// TestPoolIsNeverTheRequestingNamespace: alice puts a Secret in her own namespace, labelled
// as a pool credential and named like bob's CredentialsBinding; her request never gets it
// (the name would become her Shoot's credentialsBindingName in the shared project). Only
// the operator's pool namespace serves.
func TestPoolIsNeverTheRequestingNamespace(t *testing.T) {
	pool, alice := namespace(t), namespace(t)
	start(t, pool)
	grant(t, alice, "alice")
	credential(t, alice, "bobs-binding", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	credential(t, alice, "bobs-dedicated", map[string]string{"hyperscalerType": "aws"})
	request(t, alice, "shared", "aws", "shared")
	request(t, alice, "dedicated", "aws", "globalaccount:alice")
	for _, name := range []string{"shared", "dedicated"} {
		if got := waitReason(t, alice, name, cp.ReasonPoolExhausted).Status.GardenerSecretName; got != "" {
			t.Errorf("%s: assigned %q from the requesting namespace", name, got)
		}
	}
	if l := secret(t, alice, "bobs-dedicated").Labels; l["tenantName"] != "" {
		t.Errorf("a Secret of the requesting namespace was claimed: %v", l)
	}
	credential(t, pool, "aws-pool", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	if got := waitReason(t, alice, "shared", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-pool" {
		t.Errorf("got %q, want aws-pool from the pool namespace", got)
	}
}

// TestClaimedCredentialIsNotHandedToAnotherTenant: a dedicated credential claimed from
// one namespace records it; a request from another namespace naming the same global
// account is not given it, nor one labelled tenantName with no claim record, nor (through
// a forged status) may it mark it dirty.
func TestClaimedCredentialIsNotHandedToAnotherTenant(t *testing.T) {
	pool, bob, alice := namespace(t), namespace(t), namespace(t)
	credential(t, pool, "aws-bob", map[string]string{"hyperscalerType": "aws"})
	credential(t, pool, "aws-unrecorded", map[string]string{"hyperscalerType": "aws", "tenantName": "acct9"})
	grant(t, bob, "acct1")
	grant(t, alice, "acct1,acct9")
	start(t, pool)
	request(t, bob, "bob", "aws", "globalaccount:acct1")
	if got := waitReason(t, bob, "bob", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-bob" {
		t.Fatalf("bob got %q", got)
	}
	if by := secret(t, pool, "aws-bob").Annotations[cp.AnnotationClaimedBy]; by != bob+"/bob" {
		t.Errorf("claim record %q, want %s/bob", by, bob)
	}
	request(t, alice, "alice", "aws", "globalaccount:acct1")
	request(t, alice, "alice9", "aws", "globalaccount:acct9")
	for _, name := range []string{"alice", "alice9"} {
		if got := waitReason(t, alice, name, cp.ReasonPoolExhausted).Status.GardenerSecretName; got != "" {
			t.Errorf("%s: handed %q", name, got)
		}
	}
	// A forged status naming bob's credential is not kept, and deleting the request does
	// not release bob's credential.
	sr := &cp.SubscriptionRequest{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: alice, Name: "alice"}, sr); err != nil {
		t.Fatal(err)
	}
	sr.Status.GardenerSecretName = "aws-bob"
	if err := env.Client.Status().Update(ctx, sr); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, sr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "alice's request to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: alice, Name: "alice"}, &cp.SubscriptionRequest{}))
	})
	if l := secret(t, pool, "aws-bob").Labels; l["dirty"] != "" || l["tenantName"] != "acct1" {
		t.Errorf("bob's credential after alice's release: %v", l)
	}
}

// TestDedicatedCredentialsOnlyForGrantedAccounts: a tenant's requests for global accounts
// its namespace is not granted claim nothing and wait, saying what the operator sets; the
// grant, given later, brings the waiting request back (the Namespace watch) and it gets
// its credential. The operator's own namespace needs no grant. Deleting a denied request
// with a forged status naming a free credential spoils nothing; a credential claimed
// while granted is still released (dirty) after the grant is gone.
func TestDedicatedCredentialsOnlyForGrantedAccounts(t *testing.T) {
	pool, tenant := namespace(t), namespace(t)
	free := []string{"aws-1", "aws-2", "aws-3"}
	for _, name := range free {
		credential(t, pool, name, map[string]string{"hyperscalerType": "aws"})
	}
	start(t, pool)
	accounts := []string{"random-1", "random-2", "random-3"}
	for _, account := range accounts {
		request(t, tenant, account, "aws", "globalaccount:"+account)
	}
	for _, account := range accounts {
		notGranted(t, tenant, account, account)
		// The event is written after the status, by the recorder's own goroutine.
		testenv.Eventually(t, account+"'s Warning event", 30*time.Second, func() bool {
			return len(testenv.WarningEvents(t, env.Client, tenant, account, cp.ReasonGlobalAccountNotGranted)) > 0
		})
		if events := testenv.WarningEvents(t, env.Client, tenant, account, cp.ReasonGlobalAccountNotGranted); len(events) != 1 {
			t.Errorf("%s: %d Warning events %s, want 1", account, len(events), cp.ReasonGlobalAccountNotGranted)
		}
	}
	for _, name := range free {
		if l := secret(t, pool, name).Labels; l["tenantName"] != "" || l["dirty"] != "" {
			t.Errorf("%s claimed for an account nobody granted: %v", name, l)
		}
	}

	// The operator's own requests need no grant.
	request(t, pool, "operators", "aws", "globalaccount:ga-op")
	if got := waitReason(t, pool, "operators", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-1" {
		t.Errorf("the operator's request got %q, want aws-1", got)
	}

	// The grant comes later: that request is brought back and claims; the others wait on.
	grant(t, tenant, "random-2")
	if got := waitReason(t, tenant, "random-2", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-2" {
		t.Fatalf("random-2 got %q after its grant, want aws-2", got)
	}
	if s := secret(t, pool, "aws-2"); s.Labels["tenantName"] != "random-2" || s.Annotations[cp.AnnotationClaimedBy] != tenant+"/random-2" {
		t.Errorf("aws-2 after the granted claim: labels %v, annotations %v", s.Labels, s.Annotations)
	}
	notGranted(t, tenant, "random-1", "random-2,random-1")
	notGranted(t, tenant, "random-3", "random-2,random-3")

	// A denied request with a forged status naming the last free credential: deleting it
	// does not mark that credential dirty.
	sr := &cp.SubscriptionRequest{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "random-1"}, sr); err != nil {
		t.Fatal(err)
	}
	sr.Status.GardenerSecretName = "aws-3"
	if err := env.Client.Status().Update(ctx, sr); err != nil {
		t.Fatal(err)
	}
	deleteAndWait(t, sr)
	if l := secret(t, pool, "aws-3").Labels; l["tenantName"] != "" || l["dirty"] != "" {
		t.Errorf("a free credential named in a forged status was spoiled on delete: %v", l)
	}

	// Revoking the grant takes nothing away; releasing what was claimed still cleans it.
	grant(t, tenant, "")
	deleteAndWait(t, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "random-2"}})
	if l := secret(t, pool, "aws-2").Labels; l["dirty"] != "true" {
		t.Errorf("the credential claimed while granted, released: %v, want dirty", l)
	}
}

// notGranted waits until the request waits for a grant of account: no credential,
// Ready=False and Reconciling=True with a message that names the account, the namespace
// and the annotation value that grants it (with grants already there).
func notGranted(t *testing.T, ns, account, grants string) {
	t.Helper()
	want := []string{
		fmt.Sprintf("global account %s is not granted to namespace %s", account, ns),
		fmt.Sprintf("kubectl annotate namespace %s %s=%q --overwrite", ns, cp.AnnotationGlobalAccounts, grants),
	}
	sr := &cp.SubscriptionRequest{}
	waiting := func() bool {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: account}, sr); err != nil {
			t.Fatal(err)
		}
		ready := meta.FindStatusCondition(sr.Status.Conditions, "Ready")
		return sr.Status.GardenerSecretName == "" && ready != nil && ready.Status == metav1.ConditionFalse &&
			ready.Reason == cp.ReasonGlobalAccountNotGranted && strings.Contains(ready.Message, want[0]) && strings.Contains(ready.Message, want[1]) &&
			meta.IsStatusConditionTrue(sr.Status.Conditions, "Reconciling")
	}
	for deadline := time.Now().Add(30 * time.Second); !waiting(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v; want no credential, Reconciling, Ready=False %s saying %q", account, sr.Status, cp.ReasonGlobalAccountNotGranted, want)
		}
	}
}

func deleteAndWait(t *testing.T, sr *cp.SubscriptionRequest) {
	t.Helper()
	if err := env.Client.Delete(ctx, sr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "request "+sr.Name+" to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), &cp.SubscriptionRequest{}))
	})
}

// TestPoolNamespaceFlagIsValidated: a --subscription-pool-namespace that is not a
// namespace name stops the manager with a one-line error naming the flag.
func TestPoolNamespaceFlagIsValidated(t *testing.T) {
	opts := DefaultOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse([]string{"--subscription-pool-namespace=Tenant_A"}); err != nil {
		t.Fatal(err)
	}
	_, err := Setup(nil, opts) // refused before the manager is used
	if err == nil || !strings.HasPrefix(err.Error(), `--subscription-pool-namespace="Tenant_A": not a namespace name`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Setup: %v", err)
	}
}

// TestAnAccountFillsItsCredentialsInTurn: with several credentials per account (limit
// 2 users each), an account's requests fill one credential, then claim the next, and the
// request beyond every free credential waits, saying its credentials are full.
func TestAnAccountFillsItsCredentialsInTurn(t *testing.T) {
	ns := namespace(t)
	env.RunManager(t, func(mgr ctrl.Manager) error {
		_, err := Setup(mgr, Options{Pool: PoolSecrets, PoolNamespace: ns,
			MultiAccountGlobalAccounts: []string{"*"}, MultiAccountLimits: map[string]string{"default": "2"}})
		return err
	})
	for _, name := range []string{"aws-1", "aws-2"} {
		credential(t, ns, name, map[string]string{"hyperscalerType": "aws"})
	}
	used := map[string]int{}
	for i := range 4 {
		name := fmt.Sprintf("ga-%d", i)
		request(t, ns, name, "aws", "globalaccount:ga")
		used[waitReason(t, ns, name, cp.ReasonAssigned).Status.GardenerSecretName]++
	}
	if used["aws-1"] != 2 || used["aws-2"] != 2 {
		t.Errorf("requests per credential %v, want 2 and 2: the first filled before the second is claimed", used)
	}
	request(t, ns, "ga-4", "aws", "globalaccount:ga")
	sr := waitReason(t, ns, "ga-4", cp.ReasonPoolExhausted)
	if c := meta.FindStatusCondition(sr.Status.Conditions, "Ready"); c == nil || !strings.Contains(c.Message, "the account's 2 credential(s) each serve their limit of 2 users") {
		t.Errorf("the full account's request says %v", c)
	}
}

// TestTheDirtyQuotaStopsAChurningNamespace: a namespace that deletes and recreates its
// request leaves a dirty credential per cycle; at the quota (1 here) its next request
// claims nothing and says which namespace holds how many, until the operator hands the
// dirty one back, which the request then gets.
func TestTheDirtyQuotaStopsAChurningNamespace(t *testing.T) {
	ns := namespace(t)
	env.RunManager(t, func(mgr ctrl.Manager) error {
		_, err := Setup(mgr, Options{Pool: PoolSecrets, PoolNamespace: ns, DirtyQuotaPerNamespace: 1})
		return err
	})
	for _, name := range []string{"aws-1", "aws-2"} {
		credential(t, ns, name, map[string]string{"hyperscalerType": "aws"})
	}
	request(t, ns, "churn-1", "aws", "globalaccount:churner")
	first := waitReason(t, ns, "churn-1", cp.ReasonAssigned).Status.GardenerSecretName
	if err := env.Client.Delete(ctx, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "churn-1"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the released credential dirty", 30*time.Second, func() bool { return secret(t, ns, first).Labels["dirty"] == "true" })

	request(t, ns, "churn-2", "aws", "globalaccount:churner")
	sr := waitReason(t, ns, "churn-2", cp.ReasonDirtyQuotaReached)
	c := meta.FindStatusCondition(sr.Status.Conditions, "Ready")
	if want := fmt.Sprintf("namespace %s holds 1 dirty credentials (%s), its quota is 1", ns, first); c == nil || !strings.Contains(c.Message, want) {
		t.Errorf("the request says %v, want %q", c, want)
	}
	for _, name := range []string{"aws-1", "aws-2"} {
		if l := secret(t, ns, name).Labels; name != first && l["tenantName"] != "" {
			t.Errorf("%s was claimed past the quota: %v", name, l)
		}
	}
	// The operator cleans the account and hands the credential back to it.
	s := secret(t, ns, first)
	delete(s.Labels, "dirty")
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got := waitReason(t, ns, "churn-2", cp.ReasonAssigned).Status.GardenerSecretName; got != first {
		t.Errorf("after the hand-back the request got %s, want %s", got, first)
	}
}
