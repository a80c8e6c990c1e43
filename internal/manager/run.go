package manager

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// stuckStartGrace is how long Run waits, once its context has ended before the caches
// synced, for a Start that might just be getting past cache sync.
const stuckStartGrace = time.Second

// Run starts mgr and returns once it has stopped; every trustplane process runs its
// manager through it, and exports trustplane_build_info.
//
// It works around a controller-runtime v0.25 bug (kubernetes-sigs/controller-runtime#3440):
// when the context ends while the caches are still syncing (RBAC missing, an API server
// that does not answer, an object that does not decode), Start loops for ever instead of
// returning, so SIGTERM would never stop the process. Until the caches have synced nothing
// has run (no controller, no leader lease, no agent work), so Run may return at once then.
// Once they have synced, the manager stops as usual, within its graceful shutdown timeout.
func Run(ctx context.Context, mgr ctrl.Manager) error {
	if err := registerBuildInfo(); err != nil {
		return err
	}
	synced := make(chan struct{})
	// A runnable outside leader election starts right after the caches have synced.
	if err := mgr.Add(syncSignal(synced)); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case <-synced:
		return <-done
	case err := <-done:
		return err
	case <-time.After(stuckStartGrace):
		ctrl.Log.WithName("manager").Info("stopped before the caches synced; nothing had started")
		return nil
	}
}

// syncSignal closes its channel when the manager starts it: after cache sync.
type syncSignal chan struct{}

var _ crmanager.LeaderElectionRunnable = syncSignal(nil)

func (c syncSignal) NeedLeaderElection() bool { return false }

func (c syncSignal) Start(ctx context.Context) error {
	close(c)
	<-ctx.Done()
	return nil
}
