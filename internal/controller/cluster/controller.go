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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/access"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/kubeconfig"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/shoot"
	"github.com/trustplane/trustplane/internal/status"
)

const (
	// Name is the controller's name in --controllers.
	Name = "cluster"
	// FieldOwner applies everything this controller writes.
	FieldOwner = "trustplane-cluster"
	// Finalizer holds a Cluster until its Shoot is gone and its credential released.
	Finalizer = "cluster.trustplane.io/deprovision"

	// ClustersByKubeconfigRef indexes Clusters by spec.kubeconfigSecretRef.name (IndexClustersByKubeconfigRef).
	ClustersByKubeconfigRef = ".spec.kubeconfigSecretRef.name"
	// RequestsByCluster indexes KubeconfigRequests by "namespace/name" of the Cluster they
	// name and of the Cluster their grants still live in (IndexRequestsByCluster), across
	// namespaces: a request may name a Cluster in another namespace.
	RequestsByCluster = ".spec.cluster"
)

// Controller is the registry entry for `trustplane manager`; the garden options are
// shared with the kubeconfig controller, and so is the kubeconfig policy (see
// TenantPolicy).
func Controller(gardenOpts *garden.Options) manager.Controller {
	opts := DefaultOptions()
	tenantPolicy.Store(&opts.Kubeconfig)
	return manager.Controller{
		Name: Name, Help: "Cluster: Gardener Shoots from a credential pool, or brought-along clusters; cluster-admin for administrators",
		AddFlags: func(fs *pflag.FlagSet) {
			gardenOpts.AddFlags(fs)
			opts.AddFlags(fs)
		},
		Setup: gardenOpts.Setup(func(mgr ctrl.Manager, g *garden.Garden) error {
			_, err := SetupWithOptions(mgr, g, opts)
			return err
		}),
	}
}

// tenantPolicy is the kubeconfig policy the flags set, for the kubeconfig controller's
// reads of brought-along kubeconfigs too: the flags are the cluster controller's, and
// are registered (and parsed) whether it runs or not.
var tenantPolicy atomic.Pointer[kubeconfig.Policy]

// TenantPolicy is the policy brought-along kubeconfigs are read with: the flags', or the
// default (inline credentials only) before the flags exist.
func TenantPolicy() kubeconfig.Policy {
	if p := tenantPolicy.Load(); p != nil {
		return *p
	}
	return kubeconfig.DefaultPolicy()
}

// Options are the controller's flags.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// WorkersPerNamespace caps the reconciles of one namespace's Clusters at a time, so
	// one tenant's slow or dead targets can never take every worker from the others.
	WorkersPerNamespace int
	// RetryBaseDelay and RetryMaxDelay bound each Cluster's own exponential backoff.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// DeletionCleanupTimeout is how long a deleted brought-along Cluster keeps trying to
	// remove its administrators' bindings from a cluster that cannot be reached.
	DeletionCleanupTimeout time.Duration
	// Kubeconfig is what a brought-along kubeconfig may use.
	Kubeconfig kubeconfig.Policy
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 8, WorkersPerNamespace: 4, RetryBaseDelay: time.Second, RetryMaxDelay: 5 * time.Minute,
		DeletionCleanupTimeout: 5 * time.Minute, Kubeconfig: kubeconfig.DefaultPolicy()}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "cluster-workers", o.Workers, "Concurrent Cluster reconciles.")
	fs.IntVar(&o.WorkersPerNamespace, "cluster-workers-per-namespace", o.WorkersPerNamespace, "Most concurrent reconciles of one namespace's Clusters (at most --cluster-workers), so one tenant's unreachable clusters cannot hold the others'.")
	fs.DurationVar(&o.RetryBaseDelay, "cluster-retry-base-delay", o.RetryBaseDelay, "First retry delay of a Cluster after a failure; doubles with each further failure of that Cluster.")
	fs.DurationVar(&o.RetryMaxDelay, "cluster-retry-max-delay", o.RetryMaxDelay, "Longest retry delay of a Cluster.")
	fs.DurationVar(&o.DeletionCleanupTimeout, "cluster-deletion-cleanup-timeout", o.DeletionCleanupTimeout, "How long a deleted brought-along Cluster keeps trying to remove its administrators' bindings from a cluster it cannot reach before it goes anyway (with a Warning event).")
	o.Kubeconfig.AddFlags(fs)
}

// Validate checks the flags.
func (o Options) Validate() error {
	switch {
	case o.Workers < 1:
		return fmt.Errorf("--cluster-workers must be positive, not %d", o.Workers)
	case o.WorkersPerNamespace < 1 || o.WorkersPerNamespace > o.Workers:
		return fmt.Errorf("--cluster-workers-per-namespace must be between 1 and --cluster-workers (%d), not %d", o.Workers, o.WorkersPerNamespace)
	case o.RetryBaseDelay <= 0:
		return fmt.Errorf("--cluster-retry-base-delay must be positive, not %v", o.RetryBaseDelay)
	case o.RetryMaxDelay < o.RetryBaseDelay:
		return fmt.Errorf("--cluster-retry-max-delay must be at least --cluster-retry-base-delay (%v), not %v", o.RetryBaseDelay, o.RetryMaxDelay)
	case o.DeletionCleanupTimeout < 0:
		return fmt.Errorf("--cluster-deletion-cleanup-timeout must not be negative, not %v", o.DeletionCleanupTimeout)
	}
	return o.Kubeconfig.Validate()
}

// Reconciler reconciles Clusters.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // kubeconfig Secrets are read uncached: they hold cluster-admin credentials
	Recorder  events.EventRecorder
	// Garden is nil when no garden is configured.
	Garden *garden.Garden
	// Options are the flags (DefaultOptions when set up with Setup).
	Options Options
	// Clock is the time source of the deletion cleanup deadline.
	Clock clock.PassiveClock

	slots namespaceSlots
}

// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the controller to mgr with the default options; g may be nil (brought-along
// clusters only).
func Setup(mgr ctrl.Manager, g *garden.Garden) (*Reconciler, error) {
	return SetupWithOptions(mgr, g, DefaultOptions())
}

// SetupWithOptions adds the controller to mgr; g may be nil (brought-along clusters only).
func SetupWithOptions(mgr ctrl.Manager, g *garden.Garden, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := IndexClustersByKubeconfigRef(mgr); err != nil {
		return nil, err
	}
	if err := IndexRequestsByCluster(mgr); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Garden: g,
		Options: opts, Clock: clock.RealClock{}}
	options := controller.Options{
		MaxConcurrentReconciles: opts.Workers,
		// Per Cluster only: controller-runtime's default adds a bucket shared by all
		// Clusters, through which one tenant's failing Clusters would slow everyone's.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&cp.SubscriptionRequest{}).
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
		}}))
	if g != nil {
		b = b.WatchesRawSource(source.Kind(g.Cache, garden.NewShoot(), handler.TypedEnqueueRequestsFromMapFunc(clusterOfShoot)))
		// A garden that does not answer when the manager starts holds up this controller
		// until it does. With controller-runtime's default (give up after 2 minutes) the
		// whole manager would exit, and every other controller and the JWKS server with it.
		options.CacheSyncTimeout = waitForGardenForever
	}
	return r, b.WithOptions(options).Complete(r)
}

// holdingChanged: the Clusters the request concerns changed, or status.grantedIn did. A
// request withdrawn from the Cluster it still names (one that stopped granting its
// namespace) changes only the latter.
func holdingChanged(old, updated *operatorv1alpha1.KubeconfigRequest) bool {
	return !slices.Equal(old.ClusterKeys(), updated.ClusterKeys()) || !ptr.Equal(old.Status.GrantedIn, updated.Status.GrantedIn)
}

// waitForGardenForever is long enough to mean "until the garden answers".
const waitForGardenForever = 100 * 365 * 24 * time.Hour

var requestsIndexed, clustersIndexed sync.Map // ctrl.Manager → struct{}

// IndexClustersByKubeconfigRef registers the ClustersByKubeconfigRef index once per manager: the
// cluster and kubeconfig controllers both use it, and either may run without the other.
func IndexClustersByKubeconfigRef(mgr ctrl.Manager) error {
	if _, done := clustersIndexed.LoadOrStore(mgr, struct{}{}); done {
		return nil
	}
	return mgr.GetFieldIndexer().IndexField(context.Background(), &operatorv1alpha1.Cluster{}, ClustersByKubeconfigRef, func(o client.Object) []string {
		if ref := o.(*operatorv1alpha1.Cluster).Spec.KubeconfigSecretRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
}

// IndexRequestsByCluster registers the RequestsByCluster index once per manager: the
// cluster and kubeconfig controllers both use it, and either may run without the other.
func IndexRequestsByCluster(mgr ctrl.Manager) error {
	if _, done := requestsIndexed.LoadOrStore(mgr, struct{}{}); done {
		return nil
	}
	return mgr.GetFieldIndexer().IndexField(context.Background(), &operatorv1alpha1.KubeconfigRequest{}, RequestsByCluster, func(o client.Object) []string {
		var keys []string
		for _, key := range o.(*operatorv1alpha1.KubeconfigRequest).ClusterKeys() {
			keys = append(keys, key.String())
		}
		return keys
	})
}

// Reconcile provisions (or adopts, or deprovisions) one Cluster. Every wait ends with a
// watched change (Shoot, SubscriptionRequest, Secret, KubeconfigRequest): no requeue
// after a time.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	release, ok := r.slots.acquire(req.Namespace, r.Options.WorkersPerNamespace)
	if !ok {
		// Every slot of this namespace is taken (by Clusters whose targets may not
		// answer): give the worker back to the other namespaces and look again soon.
		// Nothing was done, so there is nothing to report and no backoff to grow.
		return reconcile.Result{RequeueAfter: slotRetry}, nil
	}
	defer release()
	patcher := status.NewPatcher(c)
	return patcher.Finish(ctx, r.Client, r.Recorder, reconcile.Result{}, r.reconcileOrDeprovision(ctx, c))
}

func (r *Reconciler) reconcileOrDeprovision(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	if !c.DeletionTimestamp.IsZero() {
		return r.deprovision(ctx, c)
	}
	if controllerutil.AddFinalizer(c, Finalizer) {
		if err := r.Client.Update(ctx, c); err != nil {
			return status.WriteFailed("update", c, err)
		}
	}
	return r.reconcile(ctx, c)
}

// stall reports a problem only a change of the Cluster (or its Secret) can fix: it is not
// provisioned, and Stalled.
func stall(c *operatorv1alpha1.Cluster, reason, msg string) error {
	setProvisioned(c, metav1.ConditionFalse, reason, msg)
	return status.Stalled(reason, "%s", msg)
}

// waiting reports a state that a watched change will end: the cluster is not (or no
// longer) provisioned yet.
func waiting(c *operatorv1alpha1.Cluster, reason, msg string) error {
	setProvisioned(c, metav1.ConditionFalse, reason, msg)
	return status.Waiting(reason, "%s", msg)
}

func setProvisioned(c *operatorv1alpha1.Cluster, provisioned metav1.ConditionStatus, reason, msg string) {
	status.Set(c, operatorv1alpha1.ConditionProvisioned, provisioned, reason, msg)
}

func (r *Reconciler) reconcile(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	// Cluster-admin access to the cluster: its own kubeconfig, or Gardener's once provisioned.
	adminAccess := r.provision
	if c.Spec.KubeconfigSecretRef != nil {
		adminAccess = r.broughtAlong
	}
	admin, err := adminAccess(ctx, c)
	if err != nil {
		return err
	}
	if admin != nil {
		owner := access.AdministratorsOf(c.Namespace, c.Name)
		if err := bindAdministrators(ctx, admin, owner, c.Spec.Administrators); err != nil {
			return targetFailed("binding administrators in the cluster", c.Spec.KubeconfigSecretRef != nil, admin, err)
		}
	}
	status.MarkReady(c, operatorv1alpha1.ReasonAdministratorsBound, fmt.Sprintf("administrators bound to cluster-admin: %d", len(c.Spec.Administrators)))
	return nil
}

// broughtAlong checks the Cluster's own kubeconfig.
func (r *Reconciler) broughtAlong(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	cfg, err := BroughtAlongConfigWith(ctx, r.APIReader, c, r.Options.Kubeconfig)
	var missing *missingSecretError
	var refused *kubeconfig.RefusedError
	switch {
	case errors.As(err, &missing):
		// The Secret watch brings the Cluster back when it appears.
		return nil, waiting(c, operatorv1alpha1.ReasonKubeconfigMissing, err.Error())
	case errors.As(err, &refused):
		return nil, stall(c, operatorv1alpha1.ReasonInsecureKubeconfig, err.Error())
	case errors.Is(err, errInvalidKubeconfig):
		return nil, stall(c, operatorv1alpha1.ReasonKubeconfigInvalid, err.Error())
	case err != nil:
		return nil, err
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonBroughtAlong, "brought-along cluster at "+cfg.Host)
	return cfg, nil
}

var errInvalidKubeconfig = kubeconfig.ErrInvalid

// IsKubeconfigUnusable says whether err, from BroughtAlongConfig, is a kubeconfig Secret
// or key that is missing, a kubeconfig that does not parse, or one that uses what the
// policy refuses: a change to the Secret fixes it, retrying does not.
func IsKubeconfigUnusable(err error) bool {
	var missing *missingSecretError
	var refused *kubeconfig.RefusedError
	return errors.As(err, &missing) || errors.Is(err, errInvalidKubeconfig) || errors.As(err, &refused)
}

type missingSecretError struct{ msg string }

func (e *missingSecretError) Error() string { return e.msg }

// BroughtAlongConfig reads the cluster-admin kubeconfig a brought-along Cluster points at,
// with the flags' policy (TenantPolicy).
func BroughtAlongConfig(ctx context.Context, reader client.Reader, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	return BroughtAlongConfigWith(ctx, reader, c, TenantPolicy())
}

// BroughtAlongConfigWith reads the kubeconfig a brought-along Cluster points at, through
// kubeconfig.RESTConfig: only what policy allows is used, the rest refused by name.
func BroughtAlongConfigWith(ctx context.Context, reader client.Reader, c *operatorv1alpha1.Cluster, policy kubeconfig.Policy) (*rest.Config, error) {
	ref := c.Spec.KubeconfigSecretRef
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, secret); apierrors.IsNotFound(err) {
		return nil, &missingSecretError{fmt.Sprintf("kubeconfig Secret %s not found", ref.Name)}
	} else if err != nil {
		return nil, fmt.Errorf("reading kubeconfig Secret %s: %w", ref.Name, err)
	}
	key := ref.Key
	if key == "" {
		key = "kubeconfig"
	}
	raw, ok := secret.Data[key]
	if !ok {
		return nil, &missingSecretError{fmt.Sprintf("kubeconfig Secret %s has no key %q", ref.Name, key)}
	}
	cfg, err := kubeconfig.RESTConfig(raw, policy)
	var refused *kubeconfig.RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("kubeconfig Secret %s key %q: %w", ref.Name, key, err)
	case err != nil:
		return nil, fmt.Errorf("%w in Secret %s key %q: %w", errInvalidKubeconfig, ref.Name, key, err)
	}
	return cfg, nil
}

// provision drives the Gardener path. A nil config without an error means the Cluster is
// provisioned and this generation's administrators are bound already.
func (r *Reconciler) provision(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	if r.Garden == nil {
		return nil, stall(c, operatorv1alpha1.ReasonGardenNotConfigured, "the Cluster has no kubeconfigSecretRef and the operator runs without --garden-kubeconfig")
	}
	if err := shoot.Validate(c.Spec, r.Garden.Params); err != nil {
		return nil, stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	sr, err := r.applySubscription(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := waitForSubscription(c, sr); err != nil {
		return nil, err
	}
	desired, err := shoot.Desired(c, r.Garden.Params, sr.Status.GardenerSecretName)
	if err != nil {
		return nil, stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	}
	if err := r.checkShootOwner(ctx, c, desired.GetName()); err != nil {
		return nil, err
	}
	if err := r.checkShootUpdate(ctx, c, desired); err != nil {
		return nil, err
	}
	// The OIDC ConfigMap first: Gardener refuses a Shoot naming one that does not exist.
	auth, err := r.applyAuthentication(ctx, c, desired)
	if err != nil {
		return nil, err
	}
	if err := r.applyShoot(ctx, c, desired); err != nil {
		return nil, err
	}
	if err := r.finishAuthentication(ctx, c, desired, auth); err != nil {
		return nil, err
	}
	c.Status.ShootName = desired.GetName()
	if err := followShoot(c, desired); err != nil {
		return nil, err
	}
	wasProvisioned := meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionProvisioned)
	if !wasProvisioned {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonProvisioned, "Provision", "shoot %s is provisioned", desired.GetName())
	}
	setProvisioned(c, metav1.ConditionTrue, operatorv1alpha1.ReasonProvisioned, "shoot "+desired.GetName()+": "+shoot.ProgressOf(desired).Message())
	// Gardener reports every step of its periodic reconciles on the Shoot; none of them
	// needs a new admin kubeconfig once this generation's administrators are bound.
	if ready := meta.FindStatusCondition(c.Status.Conditions, conditions.Ready); wasProvisioned && status.IsReadyForGeneration(c) &&
		ready.Reason == operatorv1alpha1.ReasonAdministratorsBound {
		return nil, nil
	}
	admin, _, err := r.Garden.AdminConfig(ctx, desired.GetName())
	if err != nil {
		return nil, gardenCallFailed(c, fmt.Errorf("admin kubeconfig: %w", err))
	}
	return admin, nil
}

// waitForSubscription waits until the Cluster's SubscriptionRequest has a credential; its
// status change brings the Cluster back.
func waitForSubscription(c *operatorv1alpha1.Cluster, sr *cp.SubscriptionRequest) error {
	ready := meta.FindStatusCondition(sr.Status.Conditions, conditions.Ready)
	if sr.Status.GardenerSecretName != "" && ready != nil && ready.Status == metav1.ConditionTrue {
		return nil
	}
	msg := "waiting for SubscriptionRequest " + sr.Name
	if ready != nil {
		msg += ": " + ready.Message
	}
	return waiting(c, operatorv1alpha1.ReasonWaitingForSubscription, msg)
}

// followShoot reports the Shoot's last operation until it is provisioned; the Shoot watch
// brings the Cluster back at every step.
func followShoot(c *operatorv1alpha1.Cluster, s *unstructured.Unstructured) error {
	progress := shoot.ProgressOf(s)
	switch {
	case progress.Provisioned():
		return nil
	case progress.Phase == shoot.PhaseFailed:
		return stall(c, operatorv1alpha1.ReasonProvisioningFailed, progress.Message())
	case progress.Phase == shoot.PhaseError: // Gardener retries
		return waiting(c, operatorv1alpha1.ReasonProvisioningError, progress.Message())
	default:
		return waiting(c, operatorv1alpha1.ReasonProvisioning, progress.Message())
	}
}

// gardenUnreachable reports a call to the garden that got no answer, or a 429 or 5xx
// (gardenWriteFailed sorts the answers): retried with backoff, with a Warning event when
// new; ClusterProvisioned says so too until the Shoot was provisioned.
func gardenUnreachable(c *operatorv1alpha1.Cluster, err error) error {
	err = status.Transient(operatorv1alpha1.ReasonGardenUnreachable, fmt.Errorf("garden: %w", err))
	if !meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionProvisioned) {
		setProvisioned(c, metav1.ConditionFalse, status.Reason(err), err.Error())
	}
	return status.Warn(err)
}

// checkShootOwner refuses to take over a Shoot of the same name made for something else.
func (r *Reconciler) checkShootOwner(ctx context.Context, c *operatorv1alpha1.Cluster, name string) error {
	live := garden.NewShoot()
	err := r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: name}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", name, err))
	}
	if l := live.GetLabels(); l[shoot.ClusterNamespaceLabel] != c.Namespace || l[shoot.ClusterNameLabel] != c.Name {
		return stall(c, operatorv1alpha1.ReasonShootNameTaken, fmt.Sprintf("shoot %s/%s exists and does not belong to this Cluster; not taking it over", r.Garden.Params.Namespace, name))
	}
	return nil
}

// applySubscription asks for the Cluster's hyperscaler credential.
func (r *Reconciler) applySubscription(ctx context.Context, c *operatorv1alpha1.Cluster) (*cp.SubscriptionRequest, error) {
	selector := c.Spec.Infrastructure.SubscriptionSelector
	if selector == "" {
		selector = "shared"
	}
	sr := &cp.SubscriptionRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: cp.GroupVersion.String(), Kind: "SubscriptionRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, operatorv1alpha1.GroupVersion.WithKind("Cluster"))}},
		// The region selects a regional pool (hyperscalerType <provider>_<region>) where there is one.
		Spec: cp.SubscriptionRequestSpec{Provider: c.Spec.Infrastructure.Provider, SubscriptionSelector: selector, Region: c.Spec.Core.Region},
	}
	if err := apply.Apply(ctx, r.Client, sr, FieldOwner); err != nil {
		return nil, status.WriteFailed("apply", sr, err)
	}
	return sr, nil
}

// targetFailed reports a failed call to the cluster itself. A brought-along cluster's
// server is the tenant's choice: its errors reach the status only as a class and the host
// (kubeconfig.Failure), never with what the server answered. A 401 or 403 is stalled (the
// kubeconfig or the cluster's RBAC must change) yet retried with backoff; anything else
// is retried with backoff, with a Warning event when new.
func targetFailed(what string, tenantChosen bool, cfg *rest.Config, err error) error {
	if tenantChosen {
		err = kubeconfig.Failure(kubeconfig.HostOf(cfg), err)
	}
	err = fmt.Errorf("%s: %w", what, err)
	if te := (*kubeconfig.TargetError)(nil); errors.As(err, &te) && (te.Class == kubeconfig.Unauthorized || te.Class == kubeconfig.Forbidden) {
		return status.Refused(operatorv1alpha1.ReasonClusterAccessDenied, err)
	}
	return status.Warn(status.Transient(operatorv1alpha1.ReasonClusterUnreachable, err))
}

// bindAdministrators makes the cluster's cluster-admin bindings match the administrators:
// it applies one per administrator and deletes only bindings it made for former ones.
func bindAdministrators(ctx context.Context, cfg *rest.Config, owner string, administrators []string) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 { // a Gardener admin kubeconfig; brought-along ones carry the policy's
		cfg.Timeout = 15 * time.Second
	}
	// A brought-along config's own dialer and proxy keep client-go from sharing its
	// transport between clients, so this one's connections are closed when done rather
	// than left idle per reconcile.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer httpClient.CloseIdleConnections()
	target, err := client.New(cfg, client.Options{HTTPClient: httpClient})
	if err != nil {
		return err
	}
	want := access.AdminBindings(owner, administrators)
	names := make([]string, len(want))
	for i := range want {
		names[i] = want[i].Name
		if err := apply.Apply(ctx, target, &want[i], FieldOwner); err != nil {
			return status.WriteFailed("apply", &want[i], err)
		}
	}
	return removeAdministratorsExcept(ctx, target, owner, names)
}

func removeAdministratorsExcept(ctx context.Context, target client.Client, owner string, keep []string) error {
	have := &rbacv1.ClusterRoleBindingList{}
	if err := target.List(ctx, have, client.MatchingLabels{access.AdministratorLabel: owner}); err != nil {
		return fmt.Errorf("listing administrator bindings: %w", err)
	}
	for i := range have.Items {
		if !slices.Contains(keep, have.Items[i].Name) {
			if err := client.IgnoreNotFound(target.Delete(ctx, &have.Items[i])); err != nil {
				return status.WriteFailed("delete", &have.Items[i], err)
			}
		}
	}
	return nil
}

// deprovision runs the deletion: KubeconfigRequests first (they clean up inside the
// cluster), then the administrators' bindings or the Shoot, then the credential. Each
// step it waits for ends with a watched change.
func (r *Reconciler) deprovision(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	if !controllerutil.ContainsFinalizer(c, Finalizer) {
		return nil
	}
	if err := r.waitForRequests(ctx, c); err != nil {
		return err
	}
	if c.Spec.KubeconfigSecretRef != nil {
		if err := r.unbindBroughtAlong(ctx, c); err != nil {
			return err
		}
	} else if err := r.deleteShoot(ctx, c); err != nil {
		return err
	} else if err := r.deleteAuthentication(ctx, c); err != nil { // the Shoot is gone
		return err
	}
	if err := r.releaseSubscription(ctx, c); err != nil {
		return err
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonDeprovisioning, "Delete", "deprovisioned")
	controllerutil.RemoveFinalizer(c, Finalizer)
	return client.IgnoreNotFound(status.WriteFailed("update", c, r.Client.Update(ctx, c)))
}

// waitForRequests holds the deletion while KubeconfigRequests of namespaces the Cluster
// grants still name it or hold grants in it (like PVC protection); the KubeconfigRequest
// watch brings the Cluster back. A request of a namespace it does not grant holds nothing
// for certain, whatever its status says (KubeconfigRequest.Holds); see waitForClaims.
func (r *Reconciler) waitForRequests(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	requests := &operatorv1alpha1.KubeconfigRequestList{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if err := r.Client.List(ctx, requests, client.MatchingFields{RequestsByCluster: key.String()}); err != nil {
		return fmt.Errorf("listing the KubeconfigRequests of the Cluster: %w", err)
	}
	var holding, claiming []string
	for i := range requests.Items {
		switch kr := &requests.Items[i]; {
		case kr.Holds(c):
			holding = append(holding, requestName(kr, c))
		case kr.ClaimsGrantsIn(c):
			claiming = append(claiming, requestName(kr, c))
		}
	}
	if len(holding) > 0 {
		slices.Sort(holding)
		return status.Waiting(operatorv1alpha1.ReasonInUse, "deletion waits for %d KubeconfigRequests of this cluster to be deleted: %s", len(holding), strings.Join(holding, ", "))
	}
	return r.waitForClaims(c, claiming)
}

// waitForClaims bounds the wait for requests of namespaces the Cluster no longer grants
// whose status says their grants still live in it. That is so while their withdrawal is
// under way, and also when a status is forged: only the manager should write one (the
// admission policy trustplane-status-writers), but this controller does not count on the
// policy being installed, so a claim never holds the Cluster for good. A Gardener
// Cluster does not wait at all: deleting its Shoot deletes whatever they hold there. A
// brought-along cluster outlives its Cluster, so they get the time its own
// administrators' bindings get (--cluster-deletion-cleanup-timeout after the deletion);
// then the deletion goes on, with a Warning event naming them.
func (r *Reconciler) waitForClaims(c *operatorv1alpha1.Cluster, claiming []string) error {
	if len(claiming) == 0 || c.Spec.KubeconfigSecretRef == nil {
		return nil
	}
	slices.Sort(claiming)
	deadline := c.DeletionTimestamp.Add(r.Options.DeletionCleanupTimeout)
	if now := r.now(); now.Before(deadline) {
		return status.Waiting(operatorv1alpha1.ReasonInUse, "deletion waits until %s for %d KubeconfigRequests of namespaces this cluster no longer grants to withdraw from it: %s",
			deadline.UTC().Format(time.RFC3339), len(claiming), strings.Join(claiming, ", ")).After(deadline.Sub(now))
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCleanupAbandoned, "Delete",
		"stopped waiting after %v for %d KubeconfigRequests of namespaces this cluster no longer grants, whose status says they hold grants in it (what they hold there, if anything, stays in the cluster): %s",
		r.Options.DeletionCleanupTimeout, len(claiming), strings.Join(claiming, ", "))
	return nil
}

// requestName names a request as the Cluster reports it: its name in the Cluster's own
// namespace, namespace/name from another.
func requestName(kr *operatorv1alpha1.KubeconfigRequest, c *operatorv1alpha1.Cluster) string {
	if kr.Namespace == c.Namespace {
		return kr.Name
	}
	return kr.Namespace + "/" + kr.Name
}

func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

// releaseSubscription deletes the Cluster's SubscriptionRequest, which releases the
// credential, and waits until it is gone (its watch brings the Cluster back).
func (r *Reconciler) releaseSubscription(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	sr := &cp.SubscriptionRequest{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, sr)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(sr, c)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading SubscriptionRequest %s: %w", c.Name, err)
	}
	if sr.DeletionTimestamp.IsZero() {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, sr)); err != nil {
			return status.WriteFailed("delete", sr, err)
		}
	}
	return status.Waiting(operatorv1alpha1.ReasonDeprovisioning, "releasing the hyperscaler credential")
}

// unbindBroughtAlong removes the administrators' bindings from a brought-along cluster,
// which outlives its Cluster. A kubeconfig that is gone, broken or refused cannot be
// used; that is reported and the deletion goes on. A cluster that cannot be reached is
// tried again with backoff until --cluster-deletion-cleanup-timeout after the deletion,
// then the deletion goes on with a Warning event saying what was left: a tenant's dead
// cluster must not keep its Cluster (and namespace) forever.
func (r *Reconciler) unbindBroughtAlong(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	cfg, err := BroughtAlongConfigWith(ctx, r.APIReader, c, r.Options.Kubeconfig)
	if IsKubeconfigUnusable(err) {
		reason := operatorv1alpha1.ReasonKubeconfigMissing
		if refused := (*kubeconfig.RefusedError)(nil); errors.As(err, &refused) {
			reason = operatorv1alpha1.ReasonInsecureKubeconfig
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, reason, "Delete", "administrator bindings left in the cluster: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	err = bindAdministrators(ctx, cfg, access.AdministratorsOf(c.Namespace, c.Name), nil)
	if err == nil {
		return nil
	}
	failed := targetFailed("removing administrator bindings", true, cfg, err)
	if r.now().Before(c.DeletionTimestamp.Add(r.Options.DeletionCleanupTimeout)) {
		return failed
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCleanupAbandoned, "Delete",
		"gave up removing the cluster-admin bindings of %d administrators (label %s=%s) from the cluster after %v: %v",
		len(c.Spec.Administrators), access.AdministratorLabel, access.AdministratorsOf(c.Namespace, c.Name), r.Options.DeletionCleanupTimeout, failed)
	return nil
}

// deleteShoot confirms and deletes the Cluster's Shoot and waits until it is gone (the
// Shoot watch brings the Cluster back). A Shoot of that name that belongs to something
// else is never touched.
func (r *Reconciler) deleteShoot(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	name := shoot.Name(c.Namespace, c.Name)
	if r.Garden == nil {
		if c.Status.ShootName == "" {
			return nil // never provisioned
		}
		return status.Stalled(operatorv1alpha1.ReasonGardenNotConfigured, "shoot %s cannot be deleted: the operator runs without --garden-kubeconfig", c.Status.ShootName)
	}
	live := garden.NewShoot()
	err := r.Garden.Client.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: name}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", name, err))
	}
	if l := live.GetLabels(); l[shoot.ClusterNamespaceLabel] != c.Namespace || l[shoot.ClusterNameLabel] != c.Name {
		return nil
	}
	if live.GetDeletionTimestamp() == nil {
		// Gardener refuses to delete a Shoot that does not carry the confirmation.
		confirm := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+shoot.ConfirmDeletionAnnotation+`":"true"}}}`))
		if err := r.Garden.Client.Patch(ctx, live, confirm); err != nil {
			return gardenWriteFailed(c, "confirm the deletion of", live, err)
		}
		if err := client.IgnoreNotFound(r.Garden.Client.Delete(ctx, live)); err != nil {
			return gardenWriteFailed(c, "delete", live, err)
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonDeprovisioning, "Delete", "deleting shoot %s", name)
	}
	msg := "deleting shoot " + name
	if p := shoot.ProgressOf(live); p.Phase == shoot.PhaseDeleting {
		msg += ": " + p.Message()
	}
	return waiting(c, operatorv1alpha1.ReasonDeprovisioning, msg)
}

// clusterOfShoot maps a Shoot to its Cluster through the labels Desired sets.
func clusterOfShoot(_ context.Context, s *unstructured.Unstructured) []reconcile.Request {
	l := s.GetLabels()
	if l[shoot.ClusterNamespaceLabel] == "" || l[shoot.ClusterNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[shoot.ClusterNamespaceLabel], Name: l[shoot.ClusterNameLabel]}}}
}

// clustersUsingSecret maps a kubeconfig Secret to the brought-along Clusters using it.
func (r *Reconciler) clustersUsingSecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &operatorv1alpha1.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{ClustersByKubeconfigRef: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, c := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}
	}
	return out
}
