package clustertarget

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/scheme"
)

// TestAForgottenClusterIsConnectedAfresh: a connection is cached per Cluster UID until the
// Cluster is forgotten (deleted), and only that Cluster's.
func TestAForgottenClusterIsConnectedAfresh(t *testing.T) {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t0ken}}]
`)
	var objs []*operatorv1alpha1.Cluster
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}); err != nil {
			t.Fatal(err)
		}
		cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: name + "-kubeconfig"}}}
		if err := c.Create(ctx, cluster); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, cluster)
	}
	conns := &Connections{Client: c, APIReader: c, Policy: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
	first := map[string]*Target{}
	for _, cluster := range objs {
		target, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: cluster.Name})
		if err != nil {
			t.Fatal(err)
		}
		first[cluster.Name] = target
	}
	if conns.Len() != 2 {
		t.Fatalf("%d connections cached, want 2", conns.Len())
	}
	conns.Forget(objs[0].UID)
	if conns.Len() != 1 {
		t.Errorf("%d connections cached after forgetting one, want 1", conns.Len())
	}
	again, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: "b"})
	if err != nil || again != first["b"] {
		t.Errorf("the other Cluster's connection was not kept: %v", err)
	}
	if again, err := conns.Get(ctx, types.NamespacedName{Namespace: "team", Name: "a"}); err != nil || again == first["a"] {
		t.Errorf("a forgotten Cluster's connection was reused: %v", err)
	}
}

// TestPrepareNeverMakesAWorkerWait: while one reconcile prepares a target, the others are
// told so at once; a target found unreachable fails every caller at once until
// UnreachableFor has passed, and is prepared again then. Other failures are retried at once.
func TestPrepareNeverMakesAWorkerWait(t *testing.T) {
	now := testingclock.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	target := &Target{Name: "dead", clock: now}

	started, finish := make(chan struct{}), make(chan error)
	first := make(chan error)
	go func() {
		first <- target.Prepare(func() error { close(started); return <-finish }, nil)
	}()
	<-started
	woken := 0
	if err := target.Prepare(func() error { t.Error("prepared twice at once"); return nil }, func() { woken++ }); !errors.Is(err, ErrPreparing) {
		t.Fatalf("a second Prepare while one runs = %v, want ErrPreparing", err)
	}
	if woken != 0 {
		t.Fatal("a caller told ErrPreparing was woken before the prepare ended")
	}
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	finish <- unreachable
	if err := <-first; !errors.Is(err, unreachable) {
		t.Fatalf("the first Prepare = %v", err)
	}
	// The caller told ErrPreparing comes back when the prepare ends, failed or not, once.
	if woken != 1 {
		t.Fatalf("a caller told ErrPreparing was woken %d times when the prepare ended, want 1", woken)
	}

	calls := 0
	prepare := func() error { calls++; return nil }
	now.SetTime(now.Now().Add(UnreachableFor - time.Second))
	if err := target.Prepare(prepare, nil); !errors.Is(err, unreachable) || calls != 0 {
		t.Fatalf("Prepare within UnreachableFor = %v after %d calls, want the failure at once", err, calls)
	}
	if err := target.Down(); !errors.Is(err, unreachable) {
		t.Errorf("Down() = %v", err)
	}
	now.SetTime(now.Now().Add(time.Second))
	if err := target.Prepare(prepare, nil); err != nil || calls != 1 || target.Down() != nil {
		t.Fatalf("Prepare after UnreachableFor = %v after %d calls", err, calls)
	}

	// A later call finding it unreachable makes it prepared again after the pause.
	target.Unreachable(unreachable)
	if err := target.Prepare(prepare, nil); !errors.Is(err, unreachable) || calls != 1 {
		t.Fatalf("Prepare right after Unreachable = %v after %d calls", err, calls)
	}
	now.SetTime(now.Now().Add(UnreachableFor))
	if err := target.Prepare(prepare, nil); err != nil || calls != 2 {
		t.Fatalf("Prepare after the pause = %v after %d calls, want prepared again", err, calls)
	}

	// A refusal is an answer: the target is up, and nothing waits.
	target.Unreachable(apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "x", errors.New("no")))
	if err := target.Down(); err != nil {
		t.Errorf("a 403 made the target down: %v", err)
	}
	broken := &Target{Name: "refusing", clock: now}
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "x", errors.New("no"))
	for range 2 {
		if err := broken.Prepare(func() error { calls++; return refused }, nil); !errors.Is(err, refused) {
			t.Fatalf("Prepare = %v", err)
		}
	}
	if calls != 4 {
		t.Errorf("a refused prepare was not tried again at once: %d calls", calls)
	}
}

// TestAChangedKubeconfigIsConnectedAfresh: a brought-along Cluster's connection stays
// while its kubeconfig Secret changes but not the kubeconfig in it (one dial), is made
// anew when the kubeconfig changes (its content hash), and is forgotten when the Secret
// goes.
func TestAChangedKubeconfigIsConnectedAfresh(t *testing.T) {
	kubeconfig := func(server string) []byte {
		return []byte(`apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: t0ken}}]
`)
	}
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig("https://127.0.0.1:1")}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "uid-a"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}}}
	for _, obj := range []client.Object{secret, cluster} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	conns := &Connections{Client: c, APIReader: c, Policy: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
	key := types.NamespacedName{Namespace: "team", Name: "a"}
	first, err := conns.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	secret.Labels = map[string]string{"touched": "yes"}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if again, err := conns.Get(ctx, key); err != nil || again != first || conns.Dials(cluster.UID) != 1 {
		t.Errorf("the Secret changed, not its kubeconfig: %v, %d dials, same connection %v", err, conns.Dials(cluster.UID), again == first)
	}
	secret.Data["kubeconfig"] = kubeconfig("https://127.0.0.1:2")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	moved, err := conns.Get(ctx, key)
	if err != nil || moved == first || moved.Config.Host != "https://127.0.0.1:2" || conns.Dials(cluster.UID) != 2 {
		t.Errorf("the kubeconfig changed: %v, %d dials, host %s", err, conns.Dials(cluster.UID), moved.Config.Host)
	}
	if err := c.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := conns.Get(ctx, key); err == nil || conns.Connected(cluster.UID) {
		t.Errorf("the Secret is gone: %v, connection kept %v", err, conns.Connected(cluster.UID))
	}
	// Evict by key forgets whatever UID the Cluster had.
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig("https://127.0.0.1:3")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := conns.Get(ctx, key); err != nil || !conns.Connected(cluster.UID) {
		t.Fatalf("connected again: %v", err)
	}
	conns.Evict(key)
	if conns.Connected(cluster.UID) || conns.Len() != 0 {
		t.Errorf("evicted, yet %d connections kept", conns.Len())
	}
}
