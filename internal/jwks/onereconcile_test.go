package jwks

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// A new JWKSConfig with nothing else to do costs one reconcile: the events its own
// reconcile causes or has already read (the echo of its ConfigMap's create, its Secret's
// create, the JWKS servers' reports of other JWKSConfigs) bring it back no more.

// TestANewSetCostsOneReconcileWhenItsEchoComesFirst: the watch event of the ConfigMap a
// reconcile creates may reach the manager before the create's answer does (on a busy
// machine, a quarter of the sets of a burst); it is still the echo of the reconcile's own
// write, and brings the JWKSConfig back no more than one that comes after.
func TestANewSetCostsOneReconcileWhenItsEchoComesFirst(t *testing.T) {
	ns := newNamespace(t)
	var owned atomic.Value // client.Reader: the controller's private cache, once set up
	var reconciles atomic.Int32
	m := startManagerWith(t, func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				// Each reconcile reads its JWKSConfig first, once.
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*jwksv1alpha1.JWKSConfig); ok && key == (client.ObjectKey{Namespace: ns, Name: "once"}) {
						reconciles.Add(1)
					}
					return c.Get(ctx, key, obj, opts...)
				},
				// The answer to a ConfigMap's create comes after its watch event.
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if err := c.Create(ctx, obj, opts...); err != nil {
						return err
					}
					if _, ok := obj.(*corev1.ConfigMap); ok && obj.GetNamespace() == ns {
						cache, _ := owned.Load().(client.Reader)
						for deadline := time.Now().Add(10 * time.Second); cache != nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
							if cache.Get(ctx, client.ObjectKeyFromObject(obj), &corev1.ConfigMap{}) == nil {
								break
							}
						}
						time.Sleep(200 * time.Millisecond) // the event handlers run after the cache has it
					}
					return nil
				},
			}), nil
		}
	})
	owned.Store(m.reconciler.Owned)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	awaitSecretWatched(t, m, ns, "tls")
	newJWKSConfig(t, ns, "once", "tls", withoutNginx)
	waitReady(t, ns, "once", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	time.Sleep(time.Second) // a second reconcile would start at once
	if n := reconciles.Load(); n != 1 {
		t.Errorf("%d reconciles of a new JWKSConfig with nothing else to do, want 1", n)
	}
}

// TestASecretAlreadyReadBringsNothingBack: the event of a Secret at the version a
// JWKSConfig's reconcile has already read its key from (the Secret created just before the
// JWKSConfig, whose event comes late) brings it back no more; another version of it, or
// another Secret of that name, does, and so does its deletion.
func TestASecretAlreadyReadBringsNothingBack(t *testing.T) {
	m := startManager(t)
	ctx := context.Background()
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "read", "tls", withoutNginx)
	waitReady(t, ns, "read", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)

	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tls"}, secret); err != nil {
		t.Fatal(err)
	}
	read := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: secret.ObjectMeta}
	if reqs := m.reconciler.configsForSecret(ctx, read); len(reqs) != 0 {
		t.Errorf("the Secret's event at the version read brings back %v", reqs)
	}
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "read"}}}
	changed := read.DeepCopy()
	changed.ResourceVersion += "0"
	if reqs := m.reconciler.configsForSecret(ctx, changed); !slices.Equal(reqs, want) {
		t.Errorf("another version of the Secret brings back %v, want %v", reqs, want)
	}
	replaced := read.DeepCopy()
	replaced.UID += "-new"
	if reqs := m.reconciler.configsForSecret(ctx, replaced); !slices.Equal(reqs, want) {
		t.Errorf("another Secret of that name brings back %v, want %v", reqs, want)
	}

	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "read", metav1.ConditionFalse, jwksv1alpha1.ReasonSecretNotFound)
}

// TestAReportBringsBackOnlyTheConfigsWhoseEntryChanged: a JWKS server's report names
// every key waiting to sign that it answers; when it changes, only the JWKSConfigs whose
// entry it adds or gives another key come back, not every one it names (a burst of new
// JWKSConfigs with a signing Secret would otherwise cost each as many reconciles as there
// are in the burst).
func TestAReportBringsBackOnlyTheConfigsWhoseEntryChanged(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := func(report jwkshttp.Report) *coordinationv1.Lease {
		body, err := json.Marshal(report)
		if err != nil {
			t.Fatal(err)
		}
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "trustplane", Name: "server",
			Labels:      map[string]string{jwksv1alpha1.ServerLabel: "server"},
			Annotations: map[string]string{jwksv1alpha1.ServingAnnotation: string(body)}}}
	}
	was := lease(jwkshttp.Report{
		"ns/same":    {KeyID: "k1", Since: since},
		"ns/rotated": {KeyID: "k1", Since: since},
		"ns/gone":    {KeyID: "k1", Since: since},
	})
	is := lease(jwkshttp.Report{
		"ns/same":    {KeyID: "k1", Since: since},
		"ns/rotated": {KeyID: "k2", Since: since.Add(time.Minute)},
		"ns/new":     {KeyID: "k1", Since: since.Add(time.Minute)},
	})
	h := (&Reconciler{}).serverReports()
	for _, tc := range []struct {
		name string
		send func(workqueue.TypedRateLimitingInterface[reconcile.Request])
		want []string
	}{
		{"a new report", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: is}, q)
		}, []string{"new", "rotated", "same"}},
		{"a changed report", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: was, ObjectNew: is}, q)
		}, []string{"new", "rotated"}},
		{"a renewal", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			renewed := is.DeepCopy()
			renewed.Spec.RenewTime = &metav1.MicroTime{Time: since.Add(time.Hour)}
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: is, ObjectNew: renewed}, q)
		}, nil},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		tc.send(q)
		var got []string
		for q.Len() > 0 {
			req, _ := q.Get()
			got = append(got, req.Name)
			q.Done(req)
		}
		q.ShutDown()
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s brings back %v, want %v", tc.name, got, tc.want)
		}
	}
}

// awaitSecretWatched waits until the manager's Secret watch has seen the Secret.
func awaitSecretWatched(t *testing.T, m *runningManager, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "the manager's Secret watch to see "+name, 10*time.Second, func() bool {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		return m.reconciler.SecretMetadata.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj) == nil
	})
	time.Sleep(100 * time.Millisecond) // and its handlers have run
}
