package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/scheme"
)

// NoRolloutLabel on a namespace keeps RollOutDeployments away from its Deployments, for
// tests of what happens while a Deployment is not available.
const NoRolloutLabel = "testenv.trustplane.io/no-rollout"

// RollOutDeployments plays, until the test ends, the part of kube-controller-manager and
// the kubelets that the test control plane does not have: every Deployment carrying the
// label key gets the status a finished rollout has (all replicas updated and available),
// as it would once its pods ran. Nothing but status is written, and only for Deployments
// outside namespaces labelled NoRolloutLabel.
func (e *Env) RollOutDeployments(tb testing.TB, labelKey string) {
	tb.Helper()
	mgr, err := RolloutStandIn(e.Config, labelKey)
	if err != nil {
		tb.Fatal(err)
	}
	Background(tb, mgr.Start)
}

// RolloutStandIn is the manager behind RollOutDeployments, for programs (benchmarks)
// that have no testing.TB: start it, and stop it by cancelling its context.
func RolloutStandIn(cfg *rest.Config, labelKey string) (ctrl.Manager, error) {
	has, err := labels.NewRequirement(labelKey, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	// Like the Deployment controller it stands in for, it is not the bottleneck of what
	// is measured: no client-side rate limit, several workers.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultLabelSelector: labels.NewSelector().Add(*has)},
	})
	if err != nil {
		return nil, err
	}
	r := &rollout{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("test-rollout").For(&appsv1.Deployment{}).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 8,
			// Every test's stand-in writes every labelled Deployment, so they lose races
			// to each other (conflicts): retry within a second, never after the default's
			// backoff of up to 1000 s, which a test waiting 30 s would not survive.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Second),
		}).Complete(r); err != nil {
		return nil, err
	}
	return mgr, nil
}

type rollout struct {
	client    client.Client
	apiReader client.Reader
}

func (r *rollout) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ns := &corev1.Namespace{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Name: d.Namespace}, ns); err != nil {
		return reconcile.Result{}, fmt.Errorf("getting namespace %s: %w", d.Namespace, err)
	}
	if ns.Labels[NoRolloutLabel] != "" {
		return reconcile.Result{}, nil
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	done := appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           want, UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want,
	}
	if d.Status.ObservedGeneration == done.ObservedGeneration && d.Status.Replicas == want &&
		d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want {
		return reconcile.Result{}, nil
	}
	d.Status = done
	return reconcile.Result{}, client.IgnoreNotFound(r.client.Status().Update(ctx, d))
}
