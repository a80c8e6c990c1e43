package kubeconfig

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
)

// TestAFirstIssueNeverIssuesTwice: the reconcile that issued a request's first credential
// has written its status, and another event brings the request back before the cache has
// that status (injected: the client serves the request as it was before). The second
// reconcile must not issue a second credential, which no status would name and which
// would stay valid until it expires (seen on a sample: two token bindings in one second).
// It waits for the cache without a request of its own, and reads the request as stored
// only if the cache is still behind after firstIssueCacheWait.
func TestAFirstIssueNeverIssuesTwice(t *testing.T) {
	ctx := context.Background()
	const namespace = "default"
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "first-issue-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "first-issue"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: admin.Name}}}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "first-issue"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster.Name, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: namespace, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	for _, obj := range []client.Object{admin, cluster, kr} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// What the cache holds: the request before the first reconcile's writes.
	var before *operatorv1alpha1.KubeconfigRequest // nil: no stale read yet
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	stale := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if got, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok && before != nil && key == client.ObjectKeyFromObject(kr) {
				before.DeepCopyInto(got)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	// One process: the reconcile that issued and the one that reads the stale cache are
	// the same Reconciler's (another process's writes precede its Lease).
	var uncachedReads int
	apiReader := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok {
				uncachedReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	opts := DefaultOptions()
	now := clocktesting.NewFakeClock(time.Now())
	opts.Clock = now
	r := &Reconciler{Client: env.Client, APIReader: apiReader, Recorder: events.NewFakeRecorder(100), opts: opts,
		targets: &clustertarget.Connections{Client: env.Client, APIReader: env.Client, Policy: opts.Kubeconfig, Clock: opts.Clock}}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(kr)}
	if err := Finalizer.Ensure(ctx, env.Client, kr); err != nil {
		t.Fatal(err)
	}
	before = kr.DeepCopy() // what a cache a step behind holds: nothing issued yet
	_, err = r.Reconcile(ctx, req)
	if err := env.Client.Get(ctx, req.NamespacedName, kr); err != nil {
		t.Fatal(err)
	}
	if kr.Status.Kubeconfig == "" {
		t.Fatalf("the first reconcile issued nothing (%v): %+v", err, kr.Status.Conditions)
	}
	if n := bindings(t, kr); n != 1 {
		t.Fatalf("%d token bindings after the first issue, want 1", n)
	}
	// A request this process never issued for trusts its cache: no read of its own
	// (make bench-kubeconfig counts the API requests per request).
	if uncachedReads != 0 {
		t.Errorf("the first issue read the request uncached %d times, want 0", uncachedReads)
	}
	r.Client = stale
	r.targets.Client = stale
	result, err := r.Reconcile(ctx, req)
	if n := bindings(t, kr); n != 1 || err != nil || result.RequeueAfter == 0 {
		t.Errorf("%d token bindings after a reconcile that read a stale cache (error %v, %+v), want 1, and a wait for the cache", n, err, result)
	}
	if uncachedReads != 0 {
		t.Errorf("a reconcile right after the first issue read the request uncached %d times, want 0 (the cache is waited for)", uncachedReads)
	}
	now.Step(firstIssueCacheWait)
	_, err = r.Reconcile(ctx, req)
	if n := bindings(t, kr); n != 1 {
		t.Errorf("%d token bindings after a reconcile on a cache still behind (error %v), want 1", n, err)
	}
	if uncachedReads == 0 {
		t.Error("a cache still behind after the wait: the request as stored was not read")
	}
}

// bindings counts the token-binding Secrets of kr in the target.
func bindings(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) int {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(TargetNamespace), client.MatchingLabels{RequestLabel: access.TargetName(kr)}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
