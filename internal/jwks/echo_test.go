package jwks

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestTheEchoOfItsOwnWriteBringsNothingBack: the watch event of the ConfigMap version a
// reconcile wrote (created, then applied on a rotation) does not start a second
// reconcile; someone else's version, a deletion, and a second event of the same version
// do.
func TestTheEchoOfItsOwnWriteBringsNothingBack(t *testing.T) {
	ctx := context.Background()
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "echo", "tls", withoutNginx)
	pass := passedOn(&d.ownWrites)

	d.mustReconcile(t, ns, "echo")
	created := getConfigMap(t, ns, "echo-jwks") // as the watch shows it
	if !pass.Delete(event.DeleteEvent{Object: created}) {
		t.Error("the deletion of the version written is dropped")
	}
	if pass.Create(event.CreateEvent{Object: created}) {
		t.Error("the echo of the set's creation brings the JWKSConfig back")
	}
	if !pass.Create(event.CreateEvent{Object: created}) {
		t.Error("a second event of the version written (a relist) is dropped too")
	}

	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	d.mustReconcile(t, ns, "echo")
	rotated := getConfigMap(t, ns, "echo-jwks")
	if rotated.ResourceVersion == created.ResourceVersion {
		t.Fatal("the rotation did not write the set")
	}
	if pass.Update(event.UpdateEvent{ObjectOld: created, ObjectNew: rotated}) {
		t.Error("the echo of the rotation's apply brings the JWKSConfig back")
	}

	edited := rotated.DeepCopy()
	edited.Data[jwkset.DocumentKey] = `{"keys":[]}`
	if err := env.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if !pass.Update(event.UpdateEvent{ObjectOld: rotated, ObjectNew: edited}) {
		t.Error("someone else's edit of the set is dropped")
	}
}

// TestAnUnseenWriteStillBringsTheConfigBack: a reconcile that stopped waiting for its
// cache to show its write (ServerSyncing) takes the expectation back, so the write's
// echo brings the JWKSConfig back to finish.
func TestAnUnseenWriteStillBringsTheConfigBack(t *testing.T) {
	d := newDirectReconciler(t, 0)
	d.Owned = blindToConfigMaps{d.Owned}
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "blind", "tls", withoutNginx)
	d.mustReconcile(t, ns, "blind")
	if c := readyCondition(getConfig(t, ns, "blind")); c == nil || c.Reason != jwksv1alpha1.ReasonServerSyncing {
		t.Fatalf("Ready %+v, want reason %s", c, jwksv1alpha1.ReasonServerSyncing)
	}
	if !passedOn(&d.ownWrites).Create(event.CreateEvent{Object: getConfigMap(t, ns, "blind-jwks")}) {
		t.Error("the echo of a write its reconcile never saw is dropped: the JWKSConfig stays ServerSyncing")
	}
}

// TestACreatedSetIsPutBackWhenLostOrEdited: with the echo of its own writes dropped, the
// controller still sees the edits and the deletion of a set it created.
func TestACreatedSetIsPutBackWhenLostOrEdited(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "kept", "tls", withoutNginx)
	waitReady(t, ns, "kept", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	want := getConfigMap(t, ns, "kept-jwks").Data[jwkset.DocumentKey]
	putBack := func(what string) {
		t.Helper()
		testenv.Eventually(t, "the set to be put back after "+what, 30*time.Second, func() bool {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept-jwks"}, cm)
			return err == nil && cm.Data[jwkset.DocumentKey] == want
		})
	}

	edited := getConfigMap(t, ns, "kept-jwks")
	edited.Data[jwkset.DocumentKey] = `{"keys":[]}`
	if err := env.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	putBack("an edit")

	if err := env.Client.Delete(ctx, getConfigMap(t, ns, "kept-jwks")); err != nil {
		t.Fatal(err)
	}
	putBack("its deletion")
}

// blindToConfigMaps is a cache that never shows a ConfigMap.
type blindToConfigMaps struct{ client.Reader }

func (b blindToConfigMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
	}
	return b.Reader.Get(ctx, key, obj, opts...)
}

// TestAnEchoBeforeTheAnswerBringsNothingBack: while a write is in flight, the events of
// the JWKSConfig's ConfigMaps wait for its answer: then its echo is dropped, and any other
// version is passed on; a write that fails passes them all on.
func TestAnEchoBeforeTheAnswerBringsNothingBack(t *testing.T) {
	id := types.NamespacedName{Namespace: "ns", Name: "idp"}
	version := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv,
			Labels: map[string]string{jwksv1alpha1.OwnerLabel: "idp"}}}
	}
	var w ownWrites
	pass := passedOn(&w)

	w.writing(id)
	if pass.Create(event.CreateEvent{Object: version("idp-jwks", "7")}) {
		t.Error("an event during the write is passed on before its answer")
	}
	if pass.Update(event.UpdateEvent{ObjectOld: version("idp-nginx", "5"), ObjectNew: version("idp-nginx", "8")}) {
		t.Error("an event during the write is passed on before its answer")
	}
	w.wrote(id, version("idp-jwks", "7"))
	if pass.n != 1 {
		t.Errorf("%d events passed on once the write answered, want 1 (nginx's ConfigMap, not the echo)", pass.n)
	}
	if !pass.Create(event.CreateEvent{Object: version("idp-jwks", "7")}) {
		t.Error("a second event of the version written (a relist) is dropped too")
	}
	if !pass.Update(event.UpdateEvent{ObjectOld: version("idp-jwks", "7"), ObjectNew: version("idp-jwks", "9")}) {
		t.Error("an event after the write is held")
	}

	pass.n = 0
	w.writing(id)
	pass.Create(event.CreateEvent{Object: version("idp-jwks", "10")})
	w.failed(id)
	if pass.n != 1 {
		t.Errorf("%d events passed on once the write failed, want 1", pass.n)
	}

	pass.n = 0
	w.writing(id)
	w.wrote(id, version("idp-jwks", "11")) // answered before its echo: as before
	if pass.Create(event.CreateEvent{Object: version("idp-jwks", "11")}) || pass.n != 0 {
		t.Error("the echo of a write that answered first brings the JWKSConfig back")
	}
	if len(w.ids) != 0 {
		t.Errorf("%d JWKSConfigs still remembered once every echo came", len(w.ids))
	}
}

// TestTheWriteLearnsWhenItsEchoCame: the reconcile that wrote a set waits for its echo,
// not for a poll of the cache: wrote's channel closes when the echo is admitted (the
// informer's cache holds the version by then), at once when the echo came before the
// answer, and never for another version.
func TestTheWriteLearnsWhenItsEchoCame(t *testing.T) {
	id := types.NamespacedName{Namespace: "ns", Name: "idp"}
	version := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idp-jwks", ResourceVersion: rv,
			Labels: map[string]string{jwksv1alpha1.OwnerLabel: "idp"}}}
	}
	came := func(echo <-chan struct{}) bool {
		select {
		case <-echo:
			return true
		default:
			return false
		}
	}
	var w ownWrites
	pass := passedOn(&w)

	w.writing(id)
	echo := w.wrote(id, version("3"))
	if came(echo) {
		t.Fatal("the echo came before any event")
	}
	pass.Update(event.UpdateEvent{ObjectOld: version("1"), ObjectNew: version("2")})
	if came(echo) {
		t.Error("an event of another version closed the wait")
	}
	pass.Update(event.UpdateEvent{ObjectOld: version("2"), ObjectNew: version("3")})
	if !came(echo) {
		t.Error("the echo was admitted and the wait still open")
	}

	w.writing(id)
	pass.Update(event.UpdateEvent{ObjectOld: version("3"), ObjectNew: version("4")})
	if !came(w.wrote(id, version("4"))) {
		t.Error("the echo came before the answer and the wait is open")
	}

	w.writing(id)
	echo = w.wrote(id, version("5"))
	w.unexpect(id, version("5"))
	if !pass.Update(event.UpdateEvent{ObjectOld: version("4"), ObjectNew: version("5")}) || came(echo) {
		t.Error("an echo no longer waited for is dropped, or closes a wait given up")
	}
}

// echoFilter is ownWrites.notAnEcho over a handler that counts what it is passed; each
// method says whether its event was passed on at once.
type echoFilter struct {
	h handler.EventHandler
	q workqueue.TypedRateLimitingInterface[reconcile.Request]
	n int
}

func passedOn(w *ownWrites) *echoFilter {
	f := &echoFilter{q: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
	count := func() { f.n++ }
	f.h = w.notAnEcho(handler.Funcs{
		CreateFunc: func(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			count()
		},
		UpdateFunc: func(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			count()
		},
		DeleteFunc: func(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			count()
		},
	})
	return f
}

func (f *echoFilter) passes(send func()) bool {
	before := f.n
	send()
	return f.n > before
}

func (f *echoFilter) Create(e event.CreateEvent) bool {
	return f.passes(func() { f.h.Create(context.Background(), e, f.q) })
}

func (f *echoFilter) Update(e event.UpdateEvent) bool {
	return f.passes(func() { f.h.Update(context.Background(), e, f.q) })
}

func (f *echoFilter) Delete(e event.DeleteEvent) bool {
	return f.passes(func() { f.h.Delete(context.Background(), e, f.q) })
}
