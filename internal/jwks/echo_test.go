package jwks

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

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
	pass := d.ownWrites.notAnEcho()

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
	if !d.ownWrites.notAnEcho().Create(event.CreateEvent{Object: getConfigMap(t, ns, "blind-jwks")}) {
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
