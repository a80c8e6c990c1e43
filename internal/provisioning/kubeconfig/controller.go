// Package kubeconfig is the Kubeconfig operator: for a KubeconfigRequest it creates, in
// the target cluster, a ServiceAccount with exactly the requested Role/ClusterRole rules,
// issues an expiring token for it through TokenRequest, and publishes the kubeconfig in
// the request's status (base64) and in a Secret. It rotates before expiry and on
// rotate: "true", revokes at once on revoke: "true", and cleans up on deletion.
package kubeconfig

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

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/finalizer"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/status"
)

// Finalizer holds a request until its objects in the target cluster are gone.
var Finalizer = finalizer.For(Name, "kubeconfig.trustplane.io/cleanup")

const (
	// Name is the controller's name in --controllers.
	Name = "kubeconfig"
	// Help is the controller's line in --help.
	Help = "KubeconfigRequest: RBAC-scoped, expiring kubeconfigs with rotate/revoke"
	// FieldOwner applies everything this controller writes.
	FieldOwner = "trustplane-kubeconfig"
	// TargetNamespace holds the ServiceAccounts and token bindings in target clusters.
	TargetNamespace = operatorv1alpha1.KubeconfigTargetNamespace
	// RequestLabel marks every target object with the request it serves: its target name
	// (access.TargetName). What the controller deletes in a target cluster it finds by this
	// label, in every namespace. The other labels and RequestAnnotation are documented in
	// api/operator/v1alpha1.
	RequestLabel          = operatorv1alpha1.KubeconfigRequestLabel
	RequestNamespaceLabel = operatorv1alpha1.KubeconfigRequestNamespaceLabel
	RequestNameLabel      = operatorv1alpha1.KubeconfigRequestNameLabel
	RequestUIDLabel       = operatorv1alpha1.KubeconfigRequestUIDLabel
	ClusterUIDLabel       = operatorv1alpha1.KubeconfigClusterUIDLabel
	RequestAnnotation     = operatorv1alpha1.KubeconfigRequestAnnotation
	// publishedNameSuffix makes the name of the Secret a kubeconfig is published in.
	publishedNameSuffix = "-kubeconfig"
)

// Reconciler reconciles KubeconfigRequests.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // requests are read uncached to tell a stale cache
	Recorder  events.EventRecorder
	opts      Options
	// targets are the connections to the Clusters' target clusters.
	targets *clustertarget.Connections
	// endpointChanges brings back every request of a Gardener Cluster whose fresh admin
	// kubeconfig reaches another server or trusts another CA than the one before: nothing
	// else says so (no watch shows an admin kubeconfig), and only the request whose
	// reconcile fetched it would notice otherwise.
	endpointChanges chan event.GenericEvent
	// slots hold each namespace to opts.WorkersPerNamespace reconciles at a time.
	slots slots.PerKey
	// firstIssues are the requests this process issued a first kubeconfig for whose cached
	// copy has not shown it yet (issue.go).
	firstIssues firstIssues
}

// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete

// Setup adds the controller to mgr. It lists by the clustertarget indexes: whoever
// assembles the manager registers them first (clustertarget.AddIndexes).
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), opts: opts,
		endpointChanges: make(chan event.GenericEvent, 64)}
	r.targets = opts.Targets
	if r.targets == nil {
		r.targets = &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Garden: opts.Garden, Policy: opts.Kubeconfig, Clock: opts.Clock}
	}
	r.targets.OnMoved(r.bringBackRequestsOf)
	if err := r.setupOrphanSweeper(mgr); err != nil {
		return nil, err
	}
	annotationsOrSpec := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	// A request that waited (for a slot of its namespace, for its target's preparation)
	// is brought back as soon as it need not wait.
	wakes, wake := handlers.Wakes(func(namespace, name string) client.Object {
		return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	})
	r.slots.Wake = wake
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.KubeconfigRequest{}, builder.WithPredicates(annotationsOrSpec)).
		Watches(&operatorv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster)).
		// A deleted Cluster's connection (credentials, sockets) goes with it.
		Watches(&operatorv1alpha1.Cluster{}, r.targets.EvictOnDelete()).
		// Secrets as metadata only, as secretNameTaken reads them: a brought-along
		// cluster's kubeconfig appearing or changing, and someone else's Secret in the way
		// of a publication going away, bring the requests concerned back.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.requestsUsingKubeconfigSecret)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(requestPublishingIn), builder.WithPredicates(deletions)).
		WatchesRawSource(source.Channel(r.endpointChanges, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster))).
		WatchesRawSource(source.Channel(wakes, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.Workers,
			// Per request only: controller-runtime's default adds a bucket shared by all
			// requests, through which one tenant's failing requests slowed everyone's.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
		}).
		Complete(r)
}

// Reconcile makes the target cluster and the published kubeconfig match the request, or
// cleans the target up once the request is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, kr); apierrors.IsNotFound(err) {
		forget(kr, req.NamespacedName) // gone: its series go with it
		r.slots.Cancel(req.Namespace, req.Name)
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if kr.Status.Kubeconfig != "" {
		r.firstIssues.seen(kr.UID) // the cache shows a kubeconfig: it cannot go back to a first issue
	}
	release, ok := r.slots.Acquire(req.Namespace, req.Name, r.opts.WorkersPerNamespace)
	if !ok {
		// Every slot of this namespace is taken (by requests whose targets may not
		// answer): give the worker back to the other namespaces and look again soon.
		return reconcile.Result{RequeueAfter: r.slots.Requeue()}, nil
	}
	defer release()
	patcher := status.NewPatcher(kr)
	result, err := r.reconcileOrFinalize(ctx, kr, patcher)
	r.observe(kr)
	result, err = patcher.Finish(ctx, r.Client, r.Recorder, result, err)
	if err == nil && kr.Status.Kubeconfig != "" {
		// The status is stored (Finish fails when its write does), with the kubeconfig a
		// first issue put there: a cache not showing it yet is only behind (issue.go).
		r.firstIssues.stored(kr.UID)
	}
	return result, err
}

func (r *Reconciler) reconcileOrFinalize(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, patcher *status.Patcher) (reconcile.Result, error) {
	if !kr.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.finalize(ctx, kr)
	}
	if err := Finalizer.Ensure(ctx, r.Client, kr); err != nil {
		return reconcile.Result{}, err
	}
	return r.reconcile(ctx, kr, patcher)
}

// reconcile serves the request through the phases (phases.go) in order; patcher writes
// the status at the end, and before the first write into a Cluster (status.grantedIn).
func (r *Reconciler) reconcile(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, patcher *status.Patcher) (reconcile.Result, error) {
	s := &scope{kr: kr, patcher: patcher, now: r.opts.Clock.Now()}
	for _, p := range r.phases() {
		if result, err := p.run(ctx, s); err != nil || !result.IsZero() || s.done {
			return result, err
		}
	}
	return reconcile.Result{}, nil
}
