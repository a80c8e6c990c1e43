package manager

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// stripMetadataOnly is the shared cache's transform for objects watched as metadata only
// (Secrets, for the controllers that read their data uncached). `kubectl apply` records
// the whole object it applied in an annotation, which for a Secret holds its data, keys
// included, and managed fields are of no use to a metadata watch: neither is kept in
// memory. Typed objects pass unchanged.
func stripMetadataOnly(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		delete(m.Annotations, corev1.LastAppliedConfigAnnotation)
		m.ManagedFields = nil
	}
	return obj, nil
}

// AddCache adds a private cache (one a controller builds beside the manager's, to watch a
// narrower or differently shaped set of objects) to mgr so that it starts, and has synced,
// with the manager's own cache: before any runnable, on every replica, leader or not.
//
// mgr.Add(c) alone puts a cache.Cache among the leader-elected runnables (it does not say
// NeedLeaderElection), so it starts only once this replica leads, and after the runnables
// outside leader election: a JWKS server replica then read a cache that had not started
// (an error that stopped the manager), or, waiting for it, never served at all.
//
// The replica is ready only once the cache has synced too (a readiness check each): the
// controllers and servers that read it do not start before, and a replica that said
// ready while, say, the pod certificate signer was still listing every pod of the
// cluster was counted as working (by a rollout, by whoever watches its readiness) for
// as long as it could not sign.
func AddCache(mgr crmanager.Manager, c cache.Cache) error {
	if err := mgr.Add(startsWithManager{c}); err != nil {
		return err
	}
	return mgr.AddReadyzCheck(fmt.Sprintf("cache-%d", privateCaches.Add(1)), synced(c))
}

// privateCaches numbers the readiness checks of AddCache (their names must differ).
var privateCaches atomic.Int64

// startsWithManager has GetCache, which is how the manager knows a runnable for a cache:
// it starts those first and waits for them to sync.
type startsWithManager struct{ cache.Cache }

func (c startsWithManager) GetCache() cache.Cache { return c.Cache }
