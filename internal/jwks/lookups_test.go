package jwks

import (
	"context"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// lookupCounter counts the lookups of nginx's objects and the lists of issuer claims
// made through it.
type lookupCounter struct {
	client.Reader
	nginxConfigMap        string
	nginxGets, claimLists atomic.Int32
}

func (r *lookupCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *appsv1.Deployment, *corev1.Service:
		r.nginxGets.Add(1)
	case *corev1.ConfigMap:
		if key.Name == r.nginxConfigMap {
			r.nginxGets.Add(1)
		}
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *lookupCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.LabelSelector != nil {
		if _, ok := lo.LabelSelector.RequiresExactMatch(jwksv1alpha1.IssuerClaimLabel); ok {
			r.claimLists.Add(1)
		}
	}
	return r.Reader.List(ctx, list, opts...)
}

// TestASetThatNeverHadNginxOrAnIssuerLooksForNeither: a set published with nginx off and
// no issuer, which never held the finalizer, looks up no nginx object to delete and lists
// no issuer claim to release on its reconciles: neither can exist (both come after the
// finalizer). Each lookup that found nothing cost every such reconcile a cache read and
// its garbage (bench-jwks: about a tenth of the manager's allocations).
func TestASetThatNeverHadNginxOrAnIssuerLooksForNeither(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	cfg := newJWKSConfig(t, ns, "plain", "tls", withoutNginx)
	owned := &lookupCounter{Reader: d.Owned, nginxConfigMap: jwkset.NginxConfigMapName(cfg)}
	claims := &lookupCounter{Reader: d.Claims.Reader}
	d.Owned, d.Claims.Reader = owned, claims
	d.mustReconcile(t, ns, "plain")
	d.mustReconcile(t, ns, "plain")
	if got := getConfig(t, ns, "plain"); Finalizer.Held(got) {
		t.Fatalf("a set with nothing to clean up holds the finalizer: %v", got.Finalizers)
	}
	if n := owned.nginxGets.Load(); n != 0 {
		t.Errorf("two reconciles of a set never served by nginx looked up nginx objects %d times, want 0", n)
	}
	if n := claims.claimLists.Load(); n != 0 {
		t.Errorf("two reconciles of a set that never had an issuer listed issuer claims %d times, want 0", n)
	}
}

// TestTurningNginxOffDeletesItsObjects: a set that nginx served holds the finalizer, so
// turning nginx off still deletes nginx's ConfigMap, Deployment and Service.
func TestTurningNginxOffDeletesItsObjects(t *testing.T) {
	d := newDirectReconciler(t, 0)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	cfg := newJWKSConfig(t, ns, "served", "tls")
	_, _ = d.reconcile(t, ns, "served") // Waiting for the rollout: no kube-controller-manager here
	objs := nginxObjects(cfg)
	for _, obj := range objs {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); err != nil {
			t.Fatalf("nginx on made no %T %s: %v", obj, obj.GetName(), err)
		}
	}
	updateConfig(t, ns, "served", withoutNginx)
	d.mustReconcile(t, ns, "served")
	for _, obj := range objs {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T %s is still there after nginx was turned off: %v", obj, obj.GetName(), err)
		}
	}
}
