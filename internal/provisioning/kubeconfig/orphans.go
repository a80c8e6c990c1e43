package kubeconfig

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// setupOrphanSweeper adds the controller kubeconfig-orphans, which deletes what requests
// that no longer exist left in a Cluster's cluster (clustertarget.SweepOrphans): a safety
// net under the finalizer, which withdraws every request deleted the normal way. It runs
// per Cluster: when the Cluster appears (every Cluster at start-up: what was left while
// the manager was away), when its spec changes (a namespace it no longer grants), and when
// one of its requests is deleted. A Cluster being deleted is swept by the Cluster
// controller (brought along) or goes with its Shoot (Gardener).
func (r *Reconciler) setupOrphanSweeper(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(Name+"-orphans").
		For(&operatorv1alpha1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&operatorv1alpha1.KubeconfigRequest{}, handler.Funcs{DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if kr, ok := e.Object.(*operatorv1alpha1.KubeconfigRequest); ok {
				for _, key := range kr.ClusterKeys() {
					q.Add(reconcile.Request{NamespacedName: key})
				}
			}
		}}).
		Complete(reconcile.Func(r.sweepOrphans))
}

// sweepOrphans sweeps the Cluster at req. A Cluster that cannot be reached now is left:
// its next change, or the next deletion of one of its requests, brings it back.
func (r *Reconciler) sweepOrphans(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	target, err := r.targets.Get(ctx, req.NamespacedName)
	if err != nil {
		return status.Result(reconcile.Result{}, err) // waiting for the Cluster: no retry
	}
	if err := target.Down(); err != nil {
		return reconcile.Result{}, err
	}
	deleted, err := clustertarget.SweepOrphans(ctx, target.Client, r.APIReader, cluster)
	r.reportSweep(cluster, deleted)
	if err != nil {
		target.Unreachable(err)
		return reconcile.Result{}, fmt.Errorf("sweeping cluster %s: %w", target.Name, target.Redact(err))
	}
	return reconcile.Result{}, nil
}

// reportSweep tells the Cluster's owner what a sweep deleted.
func (r *Reconciler) reportSweep(cluster *operatorv1alpha1.Cluster, deleted []string) {
	if len(deleted) == 0 {
		return
	}
	orphansDeleted.Add(float64(len(deleted)))
	ctrl.Log.WithName(Name+"-orphans").Info("deleted objects of KubeconfigRequests that no longer exist", "cluster", types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name}, "objects", len(deleted))
	r.Recorder.Eventf(cluster, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonOrphansDeleted, "Sweep",
		"deleted %d objects granted to KubeconfigRequests that no longer exist: %s", len(deleted), status.Truncate(clustertarget.Sorted(deleted), 800))
}
