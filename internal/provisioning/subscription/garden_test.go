package subscription

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

var installGardenCRDs sync.Once

// gardenProject is a fresh project namespace of the test garden, which is the test API
// server with the CredentialsBinding and Shoot CRDs installed.
func gardenProject(t *testing.T) string {
	t.Helper()
	var err error
	installGardenCRDs.Do(func() {
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true, Paths: []string{
			filepath.Join("..", "..", "..", "test", "provisioning", "cluster", "testdata", "credentialsbindings.yaml"),
			filepath.Join("testdata", "shoots.yaml"),
		}})
	})
	if err != nil {
		t.Fatal(err)
	}
	return env.Namespace(t, "project")
}

// startGarden runs the controller with the garden's pool: the test API server plays the
// garden too, with project as the project namespace.
func startGarden(t *testing.T, project string) *Reconciler {
	t.Helper()
	return startGardenWith(t, project, func(*Options) {})
}

// startGardenWith is startGarden with its options changed by change.
func startGardenWith(t *testing.T, project string, change func(*Options)) *Reconciler {
	t.Helper()
	var r *Reconciler
	env.RunManager(t, func(mgr ctrl.Manager) error {
		params := shoot.DefaultParams()
		params.Namespace = project
		g, err := garden.New(mgr, env.Config, params, 10*time.Minute)
		if err != nil {
			return err
		}
		opts := DefaultOptions()
		opts.Pool, opts.Garden = PoolGarden, g
		change(&opts)
		r, err = Setup(mgr, opts)
		return err
	})
	return r
}

func newBinding(ns, name string) *unstructured.Unstructured {
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(CredentialsBindingGVK)
	b.SetNamespace(ns)
	b.SetName(name)
	return b
}

// binding creates a CredentialsBinding in the project, as a Gardener project's would be:
// a provider type and a reference to the Secret holding the account's credentials.
func binding(t *testing.T, project, name string, labels map[string]string) {
	t.Helper()
	b := newBinding(project, name)
	b.SetLabels(labels)
	provider, _, _ := strings.Cut(labels["hyperscalerType"], "_") // a regional pool's provider
	b.Object["provider"] = map[string]any{"type": provider}
	b.Object["credentialsRef"] = map[string]any{"apiVersion": "v1", "kind": "Secret", "namespace": project, "name": name + "-credentials"}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func getBinding(t *testing.T, project, name string) *unstructured.Unstructured {
	t.Helper()
	b := newBinding(project, name)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// setBindingLabels changes a binding's labels as an operator would (nil value: remove).
func setBindingLabels(t *testing.T, project, name string, labels map[string]*string) {
	t.Helper()
	b := getBinding(t, project, name)
	l := b.GetLabels()
	for k, v := range labels {
		if v == nil {
			delete(l, k)
		} else {
			l[k] = *v
		}
	}
	b.SetLabels(l)
	if err := env.Client.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// shootUsing creates a Shoot in the project that references the binding; clusterNS and
// clusterName, when set, label it as a Cluster's Shoot (the request of that name).
func shootUsing(t *testing.T, project, name, bindingName, clusterNS, clusterName string) *unstructured.Unstructured {
	t.Helper()
	s := garden.NewShoot()
	s.SetNamespace(project)
	s.SetName(name)
	if clusterNS != "" {
		s.SetLabels(map[string]string{operatorv1alpha1.ClusterNamespaceLabel: clusterNS, operatorv1alpha1.ClusterNameLabel: clusterName})
	}
	s.Object["spec"] = map[string]any{"credentialsBindingName": bindingName}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func deleteRequest(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Client.Delete(ctx, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func requestGone(ns, name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cp.SubscriptionRequest{}))
	}
}

// TestGardenPoolSharedCountsShoots: the least used shared binding counts the project's
// Shoots (KEB's and anyone's), not only the operator's requests; requests of any
// namespace share the one project pool.
func TestGardenPoolSharedCountsShoots(t *testing.T) {
	project, nsA, nsB := gardenProject(t), namespace(t), namespace(t)
	binding(t, project, "gcp-shared-1", map[string]string{"hyperscalerType": "gcp", "shared": "true"})
	binding(t, project, "gcp-shared-2", map[string]string{"hyperscalerType": "gcp", "shared": "true"})
	// Two Shoots nobody here requested (KEB's, say) use the first.
	shootUsing(t, project, "keb-1", "gcp-shared-1", "", "")
	shootUsing(t, project, "keb-2", "gcp-shared-1", "", "")
	startGarden(t, project)

	request(t, nsA, "trial-a", "gcp", "shared")
	if got := waitReason(t, nsA, "trial-a", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-shared-2" {
		t.Fatalf("first shared request got %s, want the binding no Shoot uses", got)
	}
	// Its Cluster's Shoot counts once with the request, not twice.
	shootUsing(t, project, "c-trial-a", "gcp-shared-2", nsA, "trial-a")
	request(t, nsB, "trial-b", "gcp", "shared")
	if got := waitReason(t, nsB, "trial-b", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-shared-2" {
		t.Fatalf("second shared request got %s: shared-1 has 2 Shoots, shared-2 one user", got)
	}
	request(t, nsB, "trial-c", "gcp", "shared")
	if got := waitReason(t, nsB, "trial-c", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-shared-1" {
		t.Fatalf("third shared request got %s: 2 users each, ties go by name", got)
	}
	// Releasing a shared binding leaves it alone.
	deleteRequest(t, nsB, "trial-c")
	testenv.Eventually(t, "the released shared request to go", 30*time.Second, requestGone(nsB, "trial-c"))
	if l := getBinding(t, project, "gcp-shared-1").GetLabels(); l["dirty"] != "" {
		t.Errorf("a shared binding was marked dirty: %v", l)
	}
}

// TestGardenPoolDedicatedLifecycle: claim, reuse, release only when no Shoot uses it,
// dirty, and the documented hand-back; internal bindings; regional pools; EU access.
func TestGardenPoolDedicatedLifecycle(t *testing.T) {
	project, ns := gardenProject(t), namespace(t)
	binding(t, project, "gcp-a", map[string]string{"hyperscalerType": "gcp"})
	binding(t, project, "gcp-b-internal", map[string]string{"hyperscalerType": "gcp", "internal": "true"})
	binding(t, project, "gcp-c-internal-ga", map[string]string{"hyperscalerType": "gcp", "internal": "true", "tenantName": "internal-ga"})
	// Assigned by hand, the operator records the tenant (namespace) too.
	internal := getBinding(t, project, "gcp-c-internal-ga")
	internal.SetAnnotations(map[string]string{cp.AnnotationClaimedBy: ns + "/internal-ga"})
	if err := env.Client.Update(ctx, internal); err != nil {
		t.Fatal(err)
	}
	binding(t, project, "gcp-eu", map[string]string{"hyperscalerType": "gcp", "euAccess": "true"})
	binding(t, project, "os-eu-de-1", map[string]string{"hyperscalerType": "openstack_eu-de-1", "shared": "true"})
	binding(t, project, "os-any", map[string]string{"hyperscalerType": "openstack", "shared": "true"})
	// The garden pool has no namespace of the operator's in the management cluster: the
	// requests' namespace is granted every account.
	grant(t, ns, "*")
	startGarden(t, project)

	// Claimed for the account (never the internal one), reused by its next request.
	request(t, ns, "acct1", "gcp", "globalaccount:acct1")
	if got := waitReason(t, ns, "acct1", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-a" {
		t.Fatalf("dedicated request got %s, want gcp-a (internal bindings are not free)", got)
	}
	if l := getBinding(t, project, "gcp-a").GetLabels(); l["tenantName"] != "acct1" {
		t.Fatalf("claimed binding labels %v", l)
	}
	request(t, ns, "acct1-again", "gcp", "acct1")
	if got := waitReason(t, ns, "acct1-again", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-a" {
		t.Errorf("the same account got %s", got)
	}
	// The pool has nothing left for another ordinary account: the internal binding stays free.
	request(t, ns, "acct2", "gcp", "globalaccount:acct2")
	waitReason(t, ns, "acct2", cp.ReasonPoolExhausted)
	// The internal account uses the internal binding labelled for it.
	request(t, ns, "internal-ga", "gcp", "globalaccount:internal-ga")
	if got := waitReason(t, ns, "internal-ga", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-c-internal-ga" {
		t.Errorf("internal account got %s", got)
	}

	// Release: its own Shoot is still there, so the request waits; another Shoot (not
	// ours) uses the binding, so once ours is gone it is released but not dirty.
	own := shootUsing(t, project, "c-acct1", "gcp-a", ns, "acct1")
	foreign := shootUsing(t, project, "keb-acct1", "gcp-a", "", "")
	deleteRequest(t, ns, "acct1-again")
	testenv.Eventually(t, "the second request to go", 30*time.Second, requestGone(ns, "acct1-again"))
	deleteRequest(t, ns, "acct1")
	waitForOwnShoot(t, ns, "acct1")
	if err := env.Client.Delete(ctx, own); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request to go once its Shoot is gone", 30*time.Second, requestGone(ns, "acct1"))
	if l := getBinding(t, project, "gcp-a").GetLabels(); l["dirty"] != "" || l["tenantName"] != "acct1" {
		t.Errorf("released binding still used by a Shoot: labels %v, want tenantName=acct1 and not dirty", l)
	}

	// The account comes back, gets its binding; the other Shoot goes; the last release
	// marks it dirty.
	request(t, ns, "acct1-b", "gcp", "acct1")
	if got := waitReason(t, ns, "acct1-b", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-a" {
		t.Errorf("returning account got %s", got)
	}
	if err := env.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	deleteRequest(t, ns, "acct1-b")
	testenv.Eventually(t, "the last release to mark the binding dirty", 30*time.Second, func() bool {
		return getBinding(t, project, "gcp-a").GetLabels()["dirty"] == "true"
	})
	// The internal binding is never dirty.
	deleteRequest(t, ns, "internal-ga")
	testenv.Eventually(t, "the internal request to go", 30*time.Second, requestGone(ns, "internal-ga"))
	if l := getBinding(t, project, "gcp-c-internal-ga").GetLabels(); l["dirty"] != "" {
		t.Errorf("an internal binding was marked dirty: %v", l)
	}

	// A dirty binding serves nobody, its former account included.
	request(t, ns, "acct1-c", "gcp", "acct1")
	waitReason(t, ns, "acct1-c", cp.ReasonPoolExhausted)
	// Hand-back: the account was cleaned; the operator removes dirty and tenantName. The
	// waiting requests are brought back by the change; one of them gets it.
	setBindingLabels(t, project, "gcp-a", map[string]*string{"dirty": nil, "tenantName": nil})
	testenv.Eventually(t, "the handed-back binding to be claimed", 30*time.Second, func() bool {
		tenant := getBinding(t, project, "gcp-a").GetLabels()["tenantName"]
		return tenant == "acct1" || tenant == "acct2"
	})

	// EU access: only the euAccess pool.
	eu := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"},
		Spec: cp.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "globalaccount:eu-ga", EUAccess: true}}
	if err := env.Client.Create(ctx, eu); err != nil {
		t.Fatal(err)
	}
	if got := waitReason(t, ns, "eu", cp.ReasonAssigned).Status.GardenerSecretName; got != "gcp-eu" {
		t.Errorf("EU-access request got %s", got)
	}

	// Regional pools: a region with a pool of its own uses it; others the provider's.
	for region, want := range map[string]string{"eu-de-1": "os-eu-de-1", "ap-jp-1": "os-any"} {
		sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "os-" + region},
			Spec: cp.SubscriptionRequestSpec{Provider: "openstack", SubscriptionSelector: "shared", Region: region}}
		if err := env.Client.Create(ctx, sr); err != nil {
			t.Fatal(err)
		}
		if got := waitReason(t, ns, sr.Name, cp.ReasonAssigned).Status.GardenerSecretName; got != want {
			t.Errorf("openstack in %s got %s, want %s", region, got, want)
		}
	}
}

// TestReleaseTimesOutOnAStuckShoot: a deleted request whose own Shoot does not go waits
// for it only --subscription-release-shoot-timeout long, as kyma-environment-broker's
// shootWaitTimeout; then its credential is released, and marked dirty only if nothing
// else uses it, with a Warning event saying so.
func TestReleaseTimesOutOnAStuckShoot(t *testing.T) {
	project, ns := gardenProject(t), namespace(t)
	binding(t, project, "aws-stuck", map[string]string{"hyperscalerType": "aws"})
	grant(t, ns, "*")
	startGardenWith(t, project, func(o *Options) { o.ReleaseShootTimeout = 3 * time.Second })

	request(t, ns, "stuck", "aws", "globalaccount:stuck")
	name := waitReason(t, ns, "stuck", cp.ReasonAssigned).Status.GardenerSecretName
	shootUsing(t, project, "c-stuck", name, ns, "stuck") // never deleted: stuck
	deleteRequest(t, ns, "stuck")
	waitForOwnShoot(t, ns, "stuck")
	testenv.Eventually(t, "the request to go after the timeout, its Shoot still there", 30*time.Second, requestGone(ns, "stuck"))
	if l := getBinding(t, project, name).GetLabels(); l["dirty"] != "true" {
		t.Errorf("released after the timeout with no other user: labels %v, want dirty", l)
	}
	testenv.Eventually(t, "a ReleaseTimedOut event", 30*time.Second, func() bool {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == cp.ReasonReleaseTimedOut && strings.Contains(e.Note, "marked dirty: nothing else uses it") {
				return true
			}
		}
		return false
	})
}

// TestWorkloadIdentityBindingsServeAsOthers: a pool of CredentialsBindings that reference
// WorkloadIdentities (no static cloud key anywhere) serves dedicated and shared requests
// as one of Secret references does: the pool reads only the bindings' labels.
func TestWorkloadIdentityBindingsServeAsOthers(t *testing.T) {
	project, ns := gardenProject(t), namespace(t)
	for _, name := range []string{"aws-wi-dedicated", "aws-wi-shared"} {
		wi := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "security.gardener.cloud/v1alpha1", "kind": "WorkloadIdentity",
			"metadata": map[string]any{"namespace": project, "name": name},
			"spec":     map[string]any{"audiences": []any{"sts.amazonaws.com"}, "targetSystem": map[string]any{"type": "aws"}}}}
		if err := env.Client.Create(ctx, wi); err != nil {
			t.Fatal(err)
		}
		b := newBinding(project, name)
		labels := map[string]string{"hyperscalerType": "aws"}
		if strings.HasSuffix(name, "shared") {
			labels["shared"] = "true"
		}
		b.SetLabels(labels)
		b.Object["provider"] = map[string]any{"type": "aws"}
		b.Object["credentialsRef"] = map[string]any{"apiVersion": "security.gardener.cloud/v1alpha1", "kind": "WorkloadIdentity", "namespace": project, "name": name}
		if err := env.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	grant(t, ns, "*")
	startGarden(t, project)
	request(t, ns, "dedicated", "aws", "globalaccount:wi-ga")
	if got := waitReason(t, ns, "dedicated", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-wi-dedicated" {
		t.Errorf("dedicated request got %q", got)
	}
	if l := getBinding(t, project, "aws-wi-dedicated").GetLabels(); l["tenantName"] != "wi-ga" {
		t.Errorf("claimed WorkloadIdentity binding labels %v", l)
	}
	request(t, ns, "shared", "aws", "shared")
	if got := waitReason(t, ns, "shared", cp.ReasonAssigned).Status.GardenerSecretName; got != "aws-wi-shared" {
		t.Errorf("shared request got %q", got)
	}
	deleteRequest(t, ns, "dedicated")
	testenv.Eventually(t, "the WorkloadIdentity binding released dirty", 30*time.Second, func() bool {
		return getBinding(t, project, "aws-wi-dedicated").GetLabels()["dirty"] == "true"
	})
}

// waitForOwnShoot waits until the deleted request name says its release waits for its
// own Shoot.
func waitForOwnShoot(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "the release of "+name+" to wait for the request's own Shoot", 30*time.Second, func() bool {
		sr := &cp.SubscriptionRequest{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sr); err != nil {
			return false
		}
		c := meta.FindStatusCondition(sr.Status.Conditions, "Ready")
		return c != nil && c.Reason == cp.ReasonWaitingForShoot
	})
}
