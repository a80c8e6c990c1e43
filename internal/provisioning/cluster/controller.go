// Package cluster is the Cluster operator. For a Cluster provisioned through Gardener it
// requests a hyperscaler credential (a SubscriptionRequest), applies the Shoot, follows
// the Shoot's last operation into ClusterProvisioned, and binds the administrators to
// cluster-admin inside the new cluster through a short-lived admin kubeconfig that is
// never stored. A brought-along cluster (kubeconfigSecretRef) skips Gardener. Deleting a
// Cluster waits for its KubeconfigRequests to go, deletes the Shoot with Gardener's
// confirmation, waits for it to be gone and releases the credential.
package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/finalizer"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/status"
)

const (
	// Name is the controller's name in --controllers.
	Name = "cluster"
	// FieldOwner applies everything this controller writes.
	FieldOwner = "trustplane-cluster"
	// Help is the controller's line in --help.
	Help = "Cluster: Gardener Shoots from a credential pool, or brought-along clusters; cluster-admin for administrators"
)

// Finalizer holds a Cluster until its Shoot is gone and its credential released.
var Finalizer = finalizer.For(Name, "cluster.trustplane.io/deprovision")

// Reconciler reconciles Clusters.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // kubeconfig Secrets are read uncached: they hold cluster-admin credentials
	Recorder  events.EventRecorder
	// Garden is nil when no garden is configured.
	Garden *garden.Garden
	// Options are the flags and dependencies it was set up with.
	Options Options

	// targets are the connections to the Clusters' target clusters, shared with the
	// kubeconfig controller when the manager's assembly hands both the same.
	targets *clustertarget.Connections
	slots   slots.PerKey
}

// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the controller to mgr. It lists by the clustertarget indexes: whoever
// assembles the manager registers them first (clustertarget.AddIndexes).
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	g := opts.Garden
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Garden: g, Options: opts, targets: opts.Targets}
	if r.targets == nil {
		r.targets = &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Garden: g, Policy: opts.Kubeconfig, Clock: r.clock()}
	}
	options := controller.Options{
		MaxConcurrentReconciles: opts.Workers,
		// Per Cluster only: controller-runtime's default adds a bucket shared by all
		// Clusters, through which one tenant's failing Clusters would slow everyone's.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
	}
	// A Cluster that waited for a slot of its namespace is brought back once one is kept
	// for it.
	wakes, wake := handlers.Wakes(func(namespace, name string) client.Object {
		return &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	})
	r.slots.Wake = wake
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.Cluster{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, status.ReconcileRequested, patchAnnotationsChanged))).
		Owns(&cp.SubscriptionRequest{}).
		// A deleted Cluster's connection (credentials, sockets) goes with it.
		Watches(&operatorv1alpha1.Cluster{}, r.targets.EvictOnDelete()).
		// Secrets as metadata only: the operator never caches credentials.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingSecret), builder.OnlyMetadata).
		// A deleting Cluster waits for its KubeconfigRequests to go, or to withdraw from it
		// (an update that changes the Clusters a request concerns, or where its grants live).
		Watches(&operatorv1alpha1.KubeconfigRequest{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, key := range o.(*operatorv1alpha1.KubeconfigRequest).ClusterKeys() {
				out = append(out, reconcile.Request{NamespacedName: key})
			}
			return out
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return holdingChanged(e.ObjectOld.(*operatorv1alpha1.KubeconfigRequest), e.ObjectNew.(*operatorv1alpha1.KubeconfigRequest))
		}})).
		WatchesRawSource(source.Channel(wakes, &handler.EnqueueRequestForObject{}))
	if g != nil {
		b = b.WatchesRawSource(source.Kind(g.Cache, garden.NewShoot(), handler.TypedEnqueueRequestsFromMapFunc(clusterOfShoot)))
		// A garden that does not answer when the manager starts holds up this controller
		// until it does, and no other.
		options.CacheSyncTimeout = garden.CacheSyncTimeout
	}
	if err := r.addLandscapePublisher(mgr); err != nil {
		return nil, err
	}
	return r, b.WithOptions(options).Complete(r)
}

// patchAnnotationsChanged passes the updates that set, change or remove the force-patch
// or suspend-patch annotation: each asks for a reconcile (a forced write, or the Shoot
// following the Cluster again).
var patchAnnotationsChanged = status.AnnotationsChanged(operatorv1alpha1.ForcePatchAnnotation, operatorv1alpha1.SuspendPatchAnnotation)

// Reconcile provisions (or adopts, or deprovisions) one Cluster. Every wait ends with a
// watched change (Shoot, SubscriptionRequest, Secret, KubeconfigRequest): no requeue
// after a time.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); apierrors.IsNotFound(err) {
		forget(c, req.NamespacedName) // gone: its series go with it
		r.slots.Cancel(req.Namespace, req.Name)
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	release, ok := r.slots.Acquire(req.Namespace, req.Name, r.Options.WorkersPerNamespace)
	if !ok {
		// Every slot of this namespace is taken (by Clusters whose targets may not
		// answer): give the worker back to the other namespaces and look again soon.
		// Nothing was done, so there is nothing to report and no backoff to grow.
		return reconcile.Result{RequeueAfter: r.slots.Requeue()}, nil
	}
	defer release()
	patcher := status.NewPatcher(c)
	result, err := patcher.Finish(ctx, r.Client, r.Recorder, reconcile.Result{}, r.reconcileOrDeprovision(ctx, c))
	observe(c) // from the conditions Finish recorded
	return result, err
}

func (r *Reconciler) reconcileOrDeprovision(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	if !c.DeletionTimestamp.IsZero() {
		if !Finalizer.Held(c) {
			return nil
		}
		return run(ctx, r.deprovisionPhases(c), &scope{c: c})
	}
	if err := Finalizer.Ensure(ctx, r.Client, c); err != nil {
		return err
	}
	return r.reconcile(ctx, c)
}

// reconcile provisions (or adopts) the Cluster through its phases (phases.go) in order.
func (r *Reconciler) reconcile(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	return run(ctx, r.phasesFor(c), &scope{c: c})
}
