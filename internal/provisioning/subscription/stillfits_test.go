package subscription

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// missingCache answers every Get as a cache being filled again answers: not found, or err.
type missingCache struct {
	cache.Cache
	err error
}

func (c missingCache) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	if c.err != nil {
		return c.err
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
}

// An assigned credential is kept unless the API server says it is gone or no longer
// serves the request: a cache that does not have it (after an API server restart, the
// chaos suite saw three requests moved to other credentials) or cannot be read is no
// reason to assign another.
func TestAnAssignedCredentialIsKeptWhateverTheCacheSays(t *testing.T) {
	ns := namespace(t)
	credential(t, ns, "aws-kept", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}, Status: cp.SubscriptionRequestStatus{GardenerSecretName: "aws-kept"}}
	want, err := requestOf(sr)
	if err != nil {
		t.Fatal(err)
	}
	reconcilerWith := func(c cache.Cache, fresh client.Reader) *Reconciler {
		return &Reconciler{pool: &pool{gvk: secretGVK, namespace: ns, operatorNamespace: ns, cache: c, fresh: fresh}}
	}
	unreadable := errors.New("the cache is not started")
	for _, tc := range []struct {
		what      string
		cache     cache.Cache
		fresh     client.Reader
		name      string
		fits      bool
		errorSays string
	}{
		{"the cache misses it", missingCache{}, env.Client, "aws-kept", true, ""},
		{"the cache cannot be read", missingCache{err: unreadable}, env.Client, "aws-kept", true, ""},
		{"neither can be read", missingCache{err: unreadable}, failingReader{unreadable}, "aws-kept", false, "reading the assigned credential aws-kept"},
		{"it is gone", missingCache{}, env.Client, "aws-gone", false, ""},
	} {
		sr.Status.GardenerSecretName = tc.name
		fits, err := reconcilerWith(tc.cache, tc.fresh).stillFits(ctx, sr, want)
		if fits != tc.fits || (err == nil) != (tc.errorSays == "") || (err != nil && !strings.Contains(err.Error(), tc.errorSays)) {
			t.Errorf("%s: stillFits = %v, %v; want %v, an error saying %q", tc.what, fits, err, tc.fits, tc.errorSays)
		}
	}
}

type failingReader struct{ err error }

func (r failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return r.err
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

// laggingPool is the pool's cache before it has seen a claim: every entry's List copy
// lacks its claim label.
type laggingPool struct{ cache.Cache }

func (c laggingPool) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Cache.List(ctx, list, opts...); err != nil {
		return err
	}
	if entries, ok := list.(*metav1.PartialObjectMetadataList); ok {
		for i := range entries.Items {
			delete(entries.Items[i].Labels, cp.LabelTenantName)
		}
	}
	return nil
}

// A reconcile working from a stale copy of the request — its own status write not yet in
// the cache, nor the claim in the pool's cache — keeps the credential the API server says
// is assigned: it never claims a second one and moves the request there. (The chaos suite,
// seed 6391000145160845497, saw a request move from cred-02 to cred-00.)
func TestAStaleCopyOfARequestNeverMovesIt(t *testing.T) {
	ns := namespace(t)
	grant(t, ns, "acct-a")
	credential(t, ns, "gcp-01", map[string]string{"hyperscalerType": "gcp"})
	r := start(t, ns)
	request(t, ns, "a", "gcp", "globalaccount:acct-a")
	assignedTo := waitReason(t, ns, "a", cp.ReasonAssigned).Status.GardenerSecretName
	if assignedTo != "gcp-01" {
		t.Fatalf("assigned %s, want gcp-01 (the only credential)", assignedTo)
	}
	// A free credential that sorts first appears.
	credential(t, ns, "gcp-00", map[string]string{"hyperscalerType": "gcp"})

	live := &cp.SubscriptionRequest{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, live); err != nil {
		t.Fatal(err)
	}
	stale := live.DeepCopy()
	stale.Status = cp.SubscriptionRequestStatus{}
	lagging := &Reconciler{Client: env.Client, APIReader: env.Client, Recorder: r.Recorder,
		pool: &pool{gvk: r.pool.gvk, namespace: ns, operatorNamespace: ns, cache: laggingPool{r.pool.cache}, writer: r.pool.writer, fresh: r.pool.fresh}}
	if err := lagging.reconcile(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got := stale.Status.GardenerSecretName; got != "gcp-01" {
		t.Errorf("a reconcile of a stale copy assigned %q; the request holds gcp-01", got)
	}
	if tenant, claimed := secret(t, ns, "gcp-00").Labels[cp.LabelTenantName]; claimed {
		t.Errorf("gcp-00 was claimed (for %q) though the request already holds gcp-01", tenant)
	}
}
