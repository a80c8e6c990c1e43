package kubeconfig

import (
	"bytes"
	"context"
	"errors"
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
// The status is known to be stored, so the cache is only behind: it is waited for without
// a request of its own, however long it takes under load (make bench-kubeconfig saw
// caches more than 2 s behind), and the request is read as stored only after
// firstIssueStoredWait.
func TestAFirstIssueNeverIssuesTwice(t *testing.T) {
	f := newFirstIssueFixture(t, "first-issue")
	_, err := f.r.Reconcile(f.ctx, f.req)
	kr := f.stored()
	if kr.Status.Kubeconfig == "" {
		t.Fatalf("the first reconcile issued nothing (%v): %+v", err, kr.Status.Conditions)
	}
	if n := bindings(t, kr); n != 1 {
		t.Fatalf("%d token bindings after the first issue, want 1", n)
	}
	// A request this process never issued for trusts its cache: no read of its own
	// (make bench-kubeconfig counts the API requests per request).
	if f.uncachedReads != 0 {
		t.Errorf("the first issue read the request uncached %d times, want 0", f.uncachedReads)
	}
	f.serveStale()
	for _, after := range []time.Duration{0, 2 * time.Second, firstIssueStoredWait - time.Second} {
		f.clock.SetTime(f.start.Add(after))
		result, err := f.r.Reconcile(f.ctx, f.req)
		if n := bindings(t, kr); n != 1 || err != nil || result.RequeueAfter == 0 {
			t.Errorf("%v after the first issue: %d token bindings after a reconcile that read a stale cache (error %v, %+v), want 1, and a wait for the cache", after, n, err, result)
		}
		if f.uncachedReads != 0 {
			t.Errorf("%v after a first issue whose status was stored: the request was read uncached %d times, want 0 (the cache is waited for)", after, f.uncachedReads)
		}
	}
	f.clock.SetTime(f.start.Add(firstIssueStoredWait))
	_, err = f.r.Reconcile(f.ctx, f.req)
	if n := bindings(t, kr); n != 1 {
		t.Errorf("%d token bindings after a reconcile on a cache still behind (error %v), want 1", n, err)
	}
	if f.uncachedReads == 0 {
		t.Error("a cache still behind after firstIssueStoredWait: the request as stored was not read")
	}
}

// TestAFirstIssueWhoseStatusWasNotStored: the status write naming the first credential a
// reconcile issued fails, so the request as stored names none. The next reconcile must
// not wait for a cache that will never show one: it reads the request as stored at once,
// and issues.
func TestAFirstIssueWhoseStatusWasNotStored(t *testing.T) {
	f := newFirstIssueFixture(t, "first-issue-unstored")
	refuse := true
	f.r.Client = interceptor.NewClient(f.base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, subResourceName string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			// The status patch sends the status only (its answer is the metadata): the
			// write refused is the one that names a kubeconfig.
			if data, err := patch.Data(obj); refuse && err == nil && bytes.Contains(data, []byte(`"kubeconfig":"`)) {
				return errors.New("injected: the status write failed")
			}
			return c.SubResource(subResourceName).Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := f.r.Reconcile(f.ctx, f.req); err == nil {
		t.Fatal("the first reconcile succeeded although its status write failed")
	}
	kr := f.stored()
	if n := bindings(t, kr); kr.Status.Kubeconfig != "" || n != 1 {
		t.Fatalf("after a first issue whose status write failed: kubeconfig stored %v, %d token bindings; want none stored, 1 binding", kr.Status.Kubeconfig != "", n)
	}
	refuse = false
	result, err := f.r.Reconcile(f.ctx, f.req)
	kr = f.stored()
	if err != nil || kr.Status.Kubeconfig == "" {
		t.Errorf("the reconcile after a failed status write issued nothing (error %v, %+v): it waited for a cache that cannot show a kubeconfig", err, result)
	}
	if f.uncachedReads != 1 {
		t.Errorf("the reconcile after a failed status write read the request uncached %d times, want 1", f.uncachedReads)
	}
}

// TestARevokedFirstIssueIsIssuedAgainAtOnce: a first kubeconfig, then a revocation and
// its undoing within firstIssueStoredWait. The revocation withdrew the kubeconfig this
// process issued, so the next issue is a first issue of its own: it must not wait for a
// cache to show the one withdrawn (a reviewer found it waited a minute, reconciling every
// 200 ms).
func TestARevokedFirstIssueIsIssuedAgainAtOnce(t *testing.T) {
	f := newFirstIssueFixture(t, "first-issue-revoked")
	if _, err := f.r.Reconcile(f.ctx, f.req); err != nil || f.stored().Status.Kubeconfig == "" {
		t.Fatalf("the first reconcile issued nothing (%v)", err)
	}
	setRevoke := func(value string) {
		t.Helper()
		kr := f.stored()
		if value == "" {
			delete(kr.Annotations, operatorv1alpha1.RevokeAnnotation)
		} else {
			metav1.SetMetaDataAnnotation(&kr.ObjectMeta, operatorv1alpha1.RevokeAnnotation, value)
		}
		if err := env.Client.Update(f.ctx, kr); err != nil {
			t.Fatal(err)
		}
	}
	setRevoke("true")
	if _, err := f.r.Reconcile(f.ctx, f.req); err != nil || f.stored().Status.Kubeconfig != "" {
		t.Fatalf("the revocation left a kubeconfig in the status (error %v)", err)
	}
	setRevoke("")
	result, err := f.r.Reconcile(f.ctx, f.req)
	if kr := f.stored(); err != nil || kr.Status.Kubeconfig == "" {
		t.Errorf("a request no longer revoked was not issued a kubeconfig at once (error %v, %+v): it waited for the cache to show the one revoked", err, result)
	}
}

// firstIssueFixture is a request with its Cluster, and a Reconciler of one process whose
// clock the test sets, whose uncached reads of the request are counted, and whose cache
// can be made to serve the request as it was before the first reconcile.
type firstIssueFixture struct {
	t             *testing.T
	ctx           context.Context
	r             *Reconciler
	req           reconcile.Request
	base          client.WithWatch
	clock         *clocktesting.FakeClock
	start         time.Time
	before        *operatorv1alpha1.KubeconfigRequest
	uncachedReads int
}

func newFirstIssueFixture(t *testing.T, name string) *firstIssueFixture {
	t.Helper()
	ctx := context.Background()
	const namespace = "default"
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: admin.Name}}}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: cluster.Name, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: namespace, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	for _, obj := range []client.Object{admin, cluster, kr} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	f := &firstIssueFixture{t: t, ctx: ctx, req: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(kr)}, base: base, start: time.Now()}
	f.clock = clocktesting.NewFakeClock(f.start)
	// One process: the reconcile that issued and the one that reads the stale cache are
	// the same Reconciler's (another process's writes precede its Lease).
	apiReader := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok {
				f.uncachedReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	opts := DefaultOptions()
	opts.Clock = f.clock
	f.r = &Reconciler{Client: env.Client, APIReader: apiReader, Recorder: events.NewFakeRecorder(100), opts: opts,
		targets: &clustertarget.Connections{Client: env.Client, APIReader: env.Client, Policy: opts.Kubeconfig, Clock: opts.Clock}}
	if err := Finalizer.Ensure(ctx, env.Client, kr); err != nil {
		t.Fatal(err)
	}
	f.before = kr.DeepCopy() // what a cache a step behind holds: nothing issued yet
	return f
}

// serveStale makes the Reconciler's cache serve the request as it was before the first
// reconcile.
func (f *firstIssueFixture) serveStale() {
	stale := interceptor.NewClient(f.base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if got, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok && key == f.req.NamespacedName {
				f.before.DeepCopyInto(got)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	f.r.Client = stale
	f.r.targets.Client = stale
}

// stored is the request as the API server holds it.
func (f *firstIssueFixture) stored() *operatorv1alpha1.KubeconfigRequest {
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := env.Client.Get(f.ctx, f.req.NamespacedName, kr); err != nil {
		f.t.Fatal(err)
	}
	return kr
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
