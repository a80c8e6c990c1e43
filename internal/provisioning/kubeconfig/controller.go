// Package kubeconfig is the Kubeconfig operator: for a KubeconfigRequest it creates, in
// the target cluster, a ServiceAccount with exactly the requested Role/ClusterRole rules,
// issues an expiring token for it through TokenRequest, and publishes the kubeconfig in
// the request's status (base64) and in a Secret. It rotates before expiry and on
// rotate: "true", revokes at once on revoke: "true", and cleans up on deletion.
package kubeconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/finalizer"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
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
	// (targetName). What the controller deletes in a target cluster it finds by this
	// label, in every namespace. The other labels and RequestAnnotation are documented in
	// api/operator/v1alpha1.
	RequestLabel          = operatorv1alpha1.KubeconfigRequestLabel
	RequestNamespaceLabel = operatorv1alpha1.KubeconfigRequestNamespaceLabel
	RequestNameLabel      = operatorv1alpha1.KubeconfigRequestNameLabel
	RequestUIDLabel       = operatorv1alpha1.KubeconfigRequestUIDLabel
	ClusterUIDLabel       = operatorv1alpha1.KubeconfigClusterUIDLabel
	RequestAnnotation     = operatorv1alpha1.KubeconfigRequestAnnotation
	// expiresAnnotation on a token binding records when its token expires.
	expiresAnnotation = "kubeconfig.trustplane.io/expires"
	// publishedNameSuffix makes the name of the Secret a kubeconfig is published in.
	publishedNameSuffix = "-kubeconfig"
)

// Options configure the controller: its flags (AddFlags) and what it depends on.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// WorkersPerNamespace caps the reconciles of one namespace's requests at a time, so
	// one tenant's requests at a slow or dead target never take every worker: another
	// tenant's revocation still runs at once.
	WorkersPerNamespace int
	// RetryBaseDelay and RetryMaxDelay bound each request's own exponential backoff.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// Ceiling is the most any request may be granted.
	Ceiling access.Ceiling
	// RotateFraction of a credential's lifetime passes before it is rotated.
	RotateFraction float64
	// MaxExpiration is the longest lifetime a request may ask for: a leaked kubeconfig is
	// worth at most this long.
	MaxExpiration time.Duration

	// Garden is the Gardener project, nil without one: only brought-along Clusters work.
	Garden *garden.Garden
	// Kubeconfig is what a brought-along Cluster's kubeconfig may use: the policy the
	// cluster controller reads it with, built and validated once with the manager.
	Kubeconfig tenantkubeconfig.Policy
	// Clock is the time source of issuing and rotation.
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 32, WorkersPerNamespace: 4, RetryBaseDelay: 500 * time.Millisecond, RetryMaxDelay: 5 * time.Minute, Ceiling: access.DefaultCeiling(), RotateFraction: 2.0 / 3, MaxExpiration: 30 * 24 * time.Hour,
		Kubeconfig: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
}

// minExpiration is the shortest lifetime TokenRequest issues (and spec.expiration's minimum).
const minExpiration = 600 * time.Second

// Validate says, in one line, what is wrong with the flags.
func (o *Options) Validate() error {
	if err := slots.ValidateFlags(Name, o.Workers, o.WorkersPerNamespace, o.RetryBaseDelay, o.RetryMaxDelay); err != nil {
		return err
	}
	if o.MaxExpiration < minExpiration {
		return fmt.Errorf("--kubeconfig-max-expiration=%s: must be at least %s, the shortest token lifetime", o.MaxExpiration, minExpiration)
	}
	if err := o.Ceiling.Validate(); err != nil {
		return fmt.Errorf("--kubeconfig-allowed-routes: %w", err)
	}
	return nil
}

// ceiling is the configured ceiling with TargetNamespace always protected: a pod there
// could mount any other request's ServiceAccount.
func (o *Options) ceiling() access.Ceiling {
	c := o.Ceiling
	c.ProtectedNamespaces = append(slices.Clone(c.ProtectedNamespaces), TargetNamespace)
	return c
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "kubeconfig-workers", o.Workers, "Concurrent KubeconfigRequest reconciles.")
	fs.IntVar(&o.WorkersPerNamespace, "kubeconfig-workers-per-namespace", o.WorkersPerNamespace, "Most concurrent reconciles of one namespace's KubeconfigRequests (at most --kubeconfig-workers), so one tenant's requests at unreachable clusters cannot hold the others'.")
	fs.DurationVar(&o.RetryBaseDelay, "kubeconfig-retry-base-delay", o.RetryBaseDelay, "First retry delay of a KubeconfigRequest after a failure; doubles with each further failure of that request.")
	fs.DurationVar(&o.RetryMaxDelay, "kubeconfig-retry-max-delay", o.RetryMaxDelay, "Longest retry delay of a KubeconfigRequest.")
	fs.StringSliceVar(&o.Ceiling.ForbiddenVerbs, "kubeconfig-forbidden-verbs", o.Ceiling.ForbiddenVerbs, "Verbs no KubeconfigRequest may be granted.")
	fs.BoolVar(&o.Ceiling.AllowSecrets, "kubeconfig-allow-secrets", o.Ceiling.AllowSecrets, "Allow KubeconfigRequests to be granted access to secrets and serviceaccounts/token.")
	fs.BoolVar(&o.Ceiling.AllowWildcardVerbs, "kubeconfig-allow-wildcard-verbs", o.Ceiling.AllowWildcardVerbs, `Allow the verb "*".`)
	fs.StringSliceVar(&o.Ceiling.Allow, "kubeconfig-allowed-routes", o.Ceiling.Allow, "Escalation routes KubeconfigRequests may be granted (refused by default): "+strings.Join(access.RouteNames(), ", ")+".")
	fs.StringSliceVar(&o.Ceiling.ProtectedNamespaces, "kubeconfig-protected-namespaces", o.Ceiling.ProtectedNamespaces,
		"Namespaces of target clusters where no KubeconfigRequest may exec into, attach to, port-forward to or create/change workloads ("+TargetNamespace+" is always protected).")
	fs.DurationVar(&o.MaxExpiration, "kubeconfig-max-expiration", o.MaxExpiration, "Longest spec.expiration a KubeconfigRequest may ask for; longer requests are refused (ExpirationTooLong).")
	fs.Float64Var(&o.RotateFraction, "kubeconfig-rotate-fraction", o.RotateFraction, "Rotate a credential once this fraction of its lifetime has passed.")
}

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
	if err := manager.RegisterMetrics(append(status.Metrics(), collectors()...)...); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), opts: opts,
		endpointChanges: make(chan event.GenericEvent, 64)}
	r.targets = &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Garden: opts.Garden, Policy: opts.Kubeconfig,
		Clock: opts.Clock, Moved: r.bringBackRequestsOf}
	if err := r.setupOrphanSweeper(mgr); err != nil {
		return nil, err
	}
	annotationsOrSpec := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.KubeconfigRequest{}, builder.WithPredicates(annotationsOrSpec)).
		Watches(&operatorv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster)).
		// A deleted Cluster's connection (credentials, sockets) goes with it.
		Watches(&operatorv1alpha1.Cluster{}, handler.Funcs{DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.targets.Forget(e.Object.GetUID())
		}}).
		// Secrets as metadata only, as secretNameTaken reads them: a brought-along
		// cluster's kubeconfig appearing or changing, and someone else's Secret in the way
		// of a publication going away, bring the requests concerned back.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.requestsUsingKubeconfigSecret)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(requestPublishingIn), builder.WithPredicates(deletions)).
		WatchesRawSource(source.Channel(r.endpointChanges, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster))).
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
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	release, ok := r.slots.Acquire(req.Namespace, r.opts.WorkersPerNamespace)
	if !ok {
		// Every slot of this namespace is taken (by requests whose targets may not
		// answer): give the worker back to the other namespaces and look again soon.
		return reconcile.Result{RequeueAfter: slots.Retry}, nil
	}
	defer release()
	patcher := status.NewPatcher(kr)
	result, err := r.reconcileOrFinalize(ctx, kr, patcher)
	r.observe(kr)
	return patcher.Finish(ctx, r.Client, r.Recorder, result, err)
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

// reconcile serves the request; patcher writes the status at the end, and before the
// first write into a Cluster (status.grantedIn).
func (r *Reconciler) reconcile(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, patcher *status.Patcher) (reconcile.Result, error) {
	now := r.opts.Clock.Now()
	// Stored with this reconcile's status, and the same in every reconcile until then.
	kr.Status.TargetName = targetName(kr)
	// A request whose spec never changed and whose status was never stored can hold only
	// what this very spec asks for, if anything: nothing of an earlier spec to look for.
	firstSpec := !kr.StatusStored() && kr.Generation <= 1
	// The record admission made at creation counts only until a status is stored, so it
	// goes into status.grantedIn with the first one: whatever that status says. Otherwise
	// a reconcile that granted and died before its status write, followed by one that
	// stored a status before granting (the target down, the Cluster unreadable), left the
	// grants recorded nowhere, and the request's deletion left them in the target (found
	// by the chaos suite: "kubeconfig: no orphan in target").
	if recorded, ok := kr.ClusterAtCreation(); ok && kr.Status.GrantedIn == nil {
		kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: recorded.Namespace, Name: recorded.Name}
	}
	if problems := r.overCeiling(kr); len(problems) > 0 {
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: %s", strings.Join(problems, "; ")))
	}
	if limit := r.opts.MaxExpiration; time.Duration(kr.Spec.Expiration)*time.Second > limit {
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonExpirationTooLong, fmt.Sprintf("denied: spec.expiration %ds is longer than this operator issues (%ds, --kubeconfig-max-expiration=%s)",
			kr.Spec.Expiration, int64(limit/time.Second), limit))
	}
	if kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true" {
		return reconcile.Result{}, r.revoke(ctx, kr)
	}
	key := kr.ClusterKey()
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, key, cluster); apierrors.IsNotFound(err) {
		cluster = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading Cluster %s: %w", key, err)
	}
	// A Cluster in another namespace serves only the namespaces it grants; the Cluster
	// watch brings the request back when its grant changes.
	if cluster != nil && !cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: Cluster %s does not grant KubeconfigRequests from namespace %s: its spec.kubeconfigRequestNamespaces must list %q", key, kr.Namespace, kr.Namespace))
	}
	held := grantedIn(kr)
	// What the previous cluster was granted goes before anything is granted in the new one.
	if held != nil && *held != key {
		// The cache may not have the status of the reconcile that already withdrew from
		// there and was granted here: withdrawing again would, where both Clusters reach
		// the same API server, delete the live ServiceAccount and with it the published
		// token. Only a request read as it is stored is acted on; the cache catches up
		// within moments (a status change is no event this controller is sent, hence the
		// requeue).
		if current, err := r.isCurrent(ctx, kr); err != nil || !current {
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, err
		}
		if err := r.withdraw(ctx, kr, *held); err != nil {
			status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonWithdrawalPending, "")
			return reconcile.Result{}, status.Transient(operatorv1alpha1.ReasonWithdrawalPending, fmt.Errorf(
				"spec.cluster changed: the kubeconfig for Cluster %s is withdrawn; deleting its ServiceAccount, roles, bindings and tokens there is pending: %w", held, err))
		}
		held = nil
	}
	if cluster == nil {
		return reconcile.Result{}, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %s: %v", key, clustertarget.ErrClusterGone)
	}
	target, err := r.targets.Get(ctx, key)
	if err != nil {
		return reconcile.Result{}, status.Transient(operatorv1alpha1.ReasonClusterNotReady, err)
	}
	if problems, err := r.podSecurity(ctx, kr, target); err != nil {
		return reconcile.Result{}, targetUnreachable(target, err)
	} else if len(problems) > 0 {
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: %s", strings.Join(problems, "; ")))
	}
	// Recorded, and stored, before anything is written there: whatever happens next (the
	// manager killed mid-way, the status write at the end failing), what the request holds
	// in that cluster can be found and withdrawn. Set only in memory, a request deleted
	// after such a failure went at once (nothing recorded, nothing to clean up) and left
	// its ServiceAccount, roles, bindings and token bindings in the target.
	// A request the admission policy trustplane-kubeconfig-requests recorded at creation
	// for this Cluster is recorded already: set in memory, status.grantedIn is stored with
	// whatever status this reconcile ends with, and the record stands until then.
	if g := kr.Status.GrantedIn; g == nil || g.Key() != key {
		recorded, ok := kr.RecordedCluster()
		kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: key.Namespace, Name: key.Name}
		if !ok || recorded != key {
			if err := patcher.Patch(ctx, r.Client); err != nil {
				return reconcile.Result{}, fmt.Errorf("recording status.grantedIn before granting in Cluster %s: %w", key, err)
			}
		}
	}
	return r.serve(ctx, kr, target, held != nil && !firstSpec, now)
}

// finalize withdraws what the request holds in the Cluster its grants live in.
func (r *Reconciler) finalize(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	if !Finalizer.Held(kr) {
		return nil
	}
	if held := grantedIn(kr); held != nil {
		if err := r.withdraw(ctx, kr, *held); err != nil {
			// Keep the finalizer: the target must be cleaned up.
			return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, err)
		}
	}
	return Finalizer.Release(ctx, r.Client, kr)
}
