// Package kubeconfig is the Kubeconfig operator: for a KubeconfigRequest it creates, in
// the target cluster, a ServiceAccount with exactly the requested Role/ClusterRole rules,
// issues an expiring token for it through TokenRequest, and publishes the kubeconfig in
// the request's status (base64) and in a Secret. It rotates before expiry and on
// rotate: "true", revokes at once on revoke: "true", and cleans up on deletion.
package kubeconfig

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
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
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/access"
	"github.com/trustplane/trustplane/internal/apply"
	clusterctrl "github.com/trustplane/trustplane/internal/controller/cluster"
	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/kubeconfig"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/shoot"
	"github.com/trustplane/trustplane/internal/status"
)

const (
	// Name is the controller's name in --controllers.
	Name = "kubeconfig"
	// FieldOwner applies everything this controller writes.
	FieldOwner = "trustplane-kubeconfig"
	// Finalizer holds a request until its objects in the target cluster are gone.
	Finalizer = "kubeconfig.trustplane.io/cleanup"
	// TargetNamespace holds the ServiceAccounts and token bindings in target clusters.
	TargetNamespace = "trustplane-kubeconfigs"
	// RequestLabel marks every target object with the request it serves: a name unique per
	// namespace/name of the request (targetName). What the controller deletes in a target
	// cluster it finds by this label, in every namespace.
	RequestLabel = "kubeconfig.trustplane.io/request"
	// RequestNamespaceLabel, RequestNameLabel and RequestUIDLabel say which request a
	// target object serves, for people and tools looking at the target. The name is
	// there when it fits a label value (63 characters); RequestAnnotation always has
	// namespace/name.
	RequestNamespaceLabel = "kubeconfig.trustplane.io/request-namespace"
	RequestNameLabel      = "kubeconfig.trustplane.io/request-name"
	RequestUIDLabel       = "kubeconfig.trustplane.io/request-uid"
	RequestAnnotation     = "kubeconfig.trustplane.io/request"
	// expiresAnnotation on a token binding records when its token expires.
	expiresAnnotation = "kubeconfig.trustplane.io/expires"
	// publishedNameSuffix makes the name of the Secret a kubeconfig is published in.
	publishedNameSuffix = "-kubeconfig"
)

// Options are the controller's flags.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers        int
	Ceiling        access.Ceiling
	RotateFraction float64
	// MaxExpiration is the longest lifetime a request may ask for: a leaked kubeconfig is
	// worth at most this long.
	MaxExpiration time.Duration
	Clock         clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 32, Ceiling: access.DefaultCeiling(), RotateFraction: 2.0 / 3, MaxExpiration: 30 * 24 * time.Hour, Clock: clock.RealClock{}}
}

// minExpiration is the shortest lifetime TokenRequest issues (and spec.expiration's minimum).
const minExpiration = 600 * time.Second

// Validate says, in one line, what is wrong with the flags.
func (o *Options) Validate() error {
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
	fs.StringSliceVar(&o.Ceiling.ForbiddenVerbs, "kubeconfig-forbidden-verbs", o.Ceiling.ForbiddenVerbs, "Verbs no KubeconfigRequest may be granted.")
	fs.BoolVar(&o.Ceiling.AllowSecrets, "kubeconfig-allow-secrets", o.Ceiling.AllowSecrets, "Allow KubeconfigRequests to be granted access to secrets and serviceaccounts/token.")
	fs.BoolVar(&o.Ceiling.AllowWildcardVerbs, "kubeconfig-allow-wildcard-verbs", o.Ceiling.AllowWildcardVerbs, `Allow the verb "*".`)
	fs.StringSliceVar(&o.Ceiling.Allow, "kubeconfig-allowed-routes", o.Ceiling.Allow, "Escalation routes KubeconfigRequests may be granted (refused by default): "+strings.Join(access.RouteNames(), ", ")+".")
	fs.StringSliceVar(&o.Ceiling.ProtectedNamespaces, "kubeconfig-protected-namespaces", o.Ceiling.ProtectedNamespaces,
		"Namespaces of target clusters where no KubeconfigRequest may exec into, attach to, port-forward to or create/change workloads ("+TargetNamespace+" is always protected).")
	fs.DurationVar(&o.MaxExpiration, "kubeconfig-max-expiration", o.MaxExpiration, "Longest spec.expiration a KubeconfigRequest may ask for; longer requests are refused (ExpirationTooLong).")
	fs.Float64Var(&o.RotateFraction, "kubeconfig-rotate-fraction", o.RotateFraction, "Rotate a credential once this fraction of its lifetime has passed.")
}

// Controller is the registry entry for `trustplane manager`.
// The garden options are registered by the cluster controller and shared.
func Controller(gardenOpts *garden.Options) manager.Controller {
	opts := DefaultOptions()
	return manager.Controller{
		Name: Name, Help: "KubeconfigRequest: RBAC-scoped, expiring kubeconfigs with rotate/revoke",
		AddFlags: opts.AddFlags,
		Setup: gardenOpts.Setup(func(mgr ctrl.Manager, g *garden.Garden) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			_, err := Setup(mgr, opts, g)
			return err
		}),
	}
}

// Reconciler reconciles KubeconfigRequests.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // kubeconfig Secrets are read uncached: they hold cluster-admin credentials
	Recorder  events.EventRecorder
	// Garden is nil when no garden is configured: only brought-along clusters work then.
	Garden *garden.Garden
	opts   Options
	// Targets gives the clients of a Cluster's target cluster (tests may replace it).
	Targets func(ctx context.Context, cluster types.NamespacedName) (*Target, error)

	// targets caches a connection per Cluster: a new one costs a TLS handshake and API
	// discovery.
	targets sync.Map // Cluster UID → *Target
	// endpointChanges brings back every request of a Gardener Cluster whose fresh admin
	// kubeconfig reaches another server or trusts another CA than the one before: nothing
	// else says so (no watch shows an admin kubeconfig), and only the request whose
	// reconcile fetched it would notice otherwise.
	endpointChanges chan event.GenericEvent
}

// Target is a connection to a target cluster.
type Target struct {
	Name   string
	Config *rest.Config
	Client client.Client
	Kube   kubernetes.Interface

	version        string    // of the kubeconfig Secret it was made from (brought along)
	tenantServer   bool      // the server is the tenant's choice: its answers never reach status
	refreshAt      time.Time // when a fresh admin kubeconfig is due (Gardener)
	mu             sync.Mutex
	namespaceReady bool
}

// endpoint is where the connection reaches the target and what it trusts there: what an
// issued kubeconfig must say to work as the connection does.
func (t *Target) endpoint() access.Endpoint {
	return access.Endpoint{Server: t.Config.Host, CAData: t.Config.CAData, TLSServerName: t.Config.ServerName}
}

// ensureNamespace applies the target namespace once per connection (again after a failure).
func (t *Target) ensureNamespace(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.namespaceReady {
		return nil
	}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: TargetNamespace}}
	if err := apply.Apply(ctx, t.Client, ns, FieldOwner); err != nil {
		return status.WriteFailed("apply", ns, err)
	}
	t.namespaceReady = true
	return nil
}

// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete

// Setup adds the controller to mgr; g may be nil (brought-along clusters only).
func Setup(mgr ctrl.Manager, opts Options, g *garden.Garden) (*Reconciler, error) {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Garden: g, opts: opts,
		endpointChanges: make(chan event.GenericEvent, 64)}
	r.Targets = r.target
	if err := clusterctrl.IndexRequestsByCluster(mgr); err != nil {
		return nil, err
	}
	if err := clusterctrl.IndexClustersByKubeconfigRef(mgr); err != nil {
		return nil, err
	}
	annotationsOrSpec := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.KubeconfigRequest{}, builder.WithPredicates(annotationsOrSpec)).
		Watches(&operatorv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster)).
		// Secrets as metadata only, as secretNameTaken reads them: a brought-along
		// cluster's kubeconfig appearing or changing, and someone else's Secret in the way
		// of a publication going away, bring the requests concerned back.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.requestsUsingKubeconfigSecret)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(requestPublishingIn), builder.WithPredicates(deletions)).
		WatchesRawSource(source.Channel(r.endpointChanges, handler.EnqueueRequestsFromMapFunc(r.requestsForCluster))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Complete(r)
}

// deletions passes only delete events.
var deletions = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// Reconcile makes the target cluster and the published kubeconfig match the request, or
// cleans the target up once the request is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, kr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patcher := status.NewPatcher(kr)
	result, err := r.reconcileOrFinalize(ctx, kr)
	return patcher.Finish(ctx, r.Client, r.Recorder, result, err)
}

func (r *Reconciler) reconcileOrFinalize(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (reconcile.Result, error) {
	if !kr.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.finalize(ctx, kr)
	}
	if controllerutil.AddFinalizer(kr, Finalizer) {
		if err := r.Client.Update(ctx, kr); err != nil {
			return reconcile.Result{}, status.WriteFailed("update", kr, err)
		}
	}
	return r.reconcile(ctx, kr)
}

func (r *Reconciler) reconcile(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (reconcile.Result, error) {
	now := r.opts.Clock.Now()
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
		return reconcile.Result{}, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %s: %v", key, errClusterGone)
	}
	target, err := r.Targets(ctx, key)
	if err != nil {
		return reconcile.Result{}, status.Transient(operatorv1alpha1.ReasonClusterNotReady, err)
	}
	// Recorded before anything is written there: whatever happens next, what the request
	// holds in that cluster can be found and withdrawn.
	kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: key.Namespace, Name: key.Name}
	return r.serve(ctx, kr, target, held != nil, now)
}

// serve grants in the target what the spec asks for and issues a kubeconfig when the one
// published is not current: none yet, rotation due or asked for, or issued for where the
// target no longer is (its server, CA bundle or TLS server name changed: a brought-along
// Cluster's kubeconfig Secret was edited, say after the API server moved to another port).
func (r *Reconciler) serve(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *Target, held bool, now time.Time) (reconcile.Result, error) {
	moved := movedFrom(kr, target)
	if moved != "" {
		// The cache may not have the status of the reconcile that already issued for the
		// new endpoint: issuing again would only spend a token. The cache catches up
		// within moments (a status change is no event this controller is sent).
		if current, err := r.isCurrent(ctx, kr); err != nil || !current {
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, stale(kr, target, moved, err)
		}
	}
	if err := r.grant(ctx, kr, target, held); err != nil {
		return reconcile.Result{}, stale(kr, target, moved, targetUnreachable(target, err))
	}
	rotateAt := r.rotateAt(kr)
	rotateNow := kr.Annotations[operatorv1alpha1.RotateAnnotation] == "true"
	if kr.Status.Kubeconfig == "" || rotateNow || !now.Before(rotateAt) || moved != "" {
		if err := r.rotate(ctx, kr, target, rotateNow, now); err != nil {
			return reconcile.Result{}, stale(kr, target, moved, err)
		}
		if moved != "" {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonTargetChanged, "Issue",
				"issued a new kubeconfig for cluster %s: %s since the previous one was issued", target.Name, moved)
		}
		rotateAt = r.rotateAt(kr)
	}
	status.MarkReady(kr, operatorv1alpha1.ReasonIssued, fmt.Sprintf("kubeconfig for cluster %s valid until %s", target.Name, kr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339)))
	return reconcile.Result{RequeueAfter: max(rotateAt.Sub(now), time.Second)}, nil
}

// grant applies the ServiceAccount and the roles the spec asks for. A spec edit (a
// generation not yet reconciled) may have removed or moved rules: what the old spec
// granted goes first, found by label in every namespace, before the new spec is applied
// (which may fail, e.g. for a namespace the target does not have yet). What the new spec
// still asks for is kept. A request that never held anything has nothing to look for.
func (r *Reconciler) grant(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *Target, held bool) error {
	if held && kr.Generation != kr.Status.ObservedGeneration {
		keepRoleIn := ""
		if kr.Spec.Role != nil {
			keepRoleIn = kr.Spec.Role.Namespace
		}
		if err := deleteRBAC(ctx, target.Client, targetName(kr), keepRoleIn, kr.Spec.ClusterRole != nil); err != nil {
			return err
		}
	}
	return r.applyRBAC(ctx, kr, target)
}

// movedFrom says how the target's endpoint differs from the one the published kubeconfig
// was issued for, in words naming at most the servers' hosts; "" when nothing is
// published or it still fits. The published kubeconfig itself is the record: nothing
// else needs to be kept, and one issued by an earlier version is checked alike.
func movedFrom(kr *operatorv1alpha1.KubeconfigRequest, target *Target) string {
	if kr.Status.Kubeconfig == "" {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		return "the published kubeconfig does not decode"
	}
	issued, err := access.EndpointOf(raw)
	if err != nil {
		return "the published kubeconfig names no cluster"
	}
	return issued.Moved(target.endpoint())
}

// stale reports err, the failure to issue a kubeconfig for where the target now is, as
// not Ready whatever generation was: the published kubeconfig is for where the target was
// (it may still work, e.g. with a CA bundle that still verifies the server, so it stays).
func stale(kr *operatorv1alpha1.KubeconfigRequest, target *Target, moved string, err error) error {
	if moved == "" || err == nil {
		return err
	}
	status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonTargetChanged, "")
	return fmt.Errorf("cluster %s: %s since the published kubeconfig was issued; issuing a new one: %w", target.Name, moved, err)
}

// isCurrent says whether kr, as read from the cache, is the stored version.
func (r *Reconciler) isCurrent(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	stored := &metav1.PartialObjectMetadata{}
	stored.SetGroupVersionKind(operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		return false, fmt.Errorf("reading KubeconfigRequest %s/%s: %w", kr.Namespace, kr.Name, err)
	}
	return stored.ResourceVersion == kr.ResourceVersion, nil
}

// grantedIn is the Cluster the request's grants live in, if any. A request issued by an
// earlier version, which did not record it, holds them in the Cluster it names.
func grantedIn(kr *operatorv1alpha1.KubeconfigRequest) *types.NamespacedName {
	switch {
	case kr.Status.GrantedIn != nil:
		key := kr.Status.GrantedIn.Key()
		return &key
	case kr.Status.IssuedAt != nil:
		key := kr.ClusterKey()
		return &key
	}
	return nil
}

// deny withdraws whatever the request holds (a request denied now must not keep what an
// earlier spec or grant gave it) and reports the denial: Stalled, until the spec, the
// ceiling or the Cluster's grant changes.
func (r *Reconciler) deny(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, reason, message string) error {
	if held := grantedIn(kr); held != nil || kr.Status.Kubeconfig != "" {
		if held == nil {
			if err := r.unpublish(ctx, kr); err != nil {
				return fmt.Errorf("%s; withdrawing the kubeconfig: %w", message, err)
			}
		} else if err := r.withdraw(ctx, kr, *held); err != nil {
			return status.Transient(reason, fmt.Errorf("%s; the kubeconfig is withdrawn, and deleting what it was granted in Cluster %s is pending: %w", message, held, err))
		}
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, reason, "Withdraw", "withdrew the kubeconfig: %s", message)
	}
	return status.Stalled(reason, "%s", message)
}

// overCeiling is why the request's rules exceed the ceiling: a ClusterRole's rules reach
// every namespace, a Role's only its own.
func (r *Reconciler) overCeiling(kr *operatorv1alpha1.KubeconfigRequest) []string {
	c := r.opts.ceiling()
	var problems []string
	if kr.Spec.ClusterRole != nil {
		for _, p := range c.Check(toRBAC(kr.Spec.ClusterRole.Rules), "") {
			problems = append(problems, "clusterRole "+p)
		}
	}
	if kr.Spec.Role != nil {
		for _, p := range c.Check(toRBAC(kr.Spec.Role.Rules), kr.Spec.Role.Namespace) {
			problems = append(problems, "role "+p)
		}
	}
	return problems
}

// rotate issues a (first or new) credential, resets the rotate annotation when it asked
// for this, and prunes the bindings of expired credentials.
func (r *Reconciler) rotate(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *Target, rotateNow bool, now time.Time) error {
	taken, err := r.secretNameTaken(ctx, kr)
	if err != nil {
		return err
	}
	if taken {
		// The Secret watch brings the request back when that Secret goes.
		return status.Stalled(operatorv1alpha1.ReasonSecretNameTaken, "Secret %s/%s exists and is not this request's: delete or rename it", kr.Namespace, secretName(kr))
	}
	rotating := kr.Status.Kubeconfig != ""
	binding, err := r.issue(ctx, kr, target, now)
	if err != nil {
		return err
	}
	if rotateNow {
		// The patch answers with the stored object: keep the status just computed.
		issuedStatus := kr.Status.DeepCopy()
		patch := client.MergeFrom(kr.DeepCopy())
		kr.Annotations[operatorv1alpha1.RotateAnnotation] = "false"
		if err := r.Client.Patch(ctx, kr, patch); err != nil {
			kr.Status = *issuedStatus
			return status.WriteFailed("patch", kr, err)
		}
		kr.Status = *issuedStatus
	}
	if rotating { // a first issue has no older binding to prune
		if err := r.pruneBindings(ctx, kr, target, binding, now); err != nil {
			return targetUnreachable(target, err)
		}
	}
	return nil
}

// targetUnreachable reports a failed call to the target cluster, retried with backoff
// (unless the target refuses it for good: RBAC, policy, quota there).
func targetUnreachable(target *Target, err error) error {
	if target.tenantServer {
		// A brought-along cluster's server is the tenant's choice (maybe an internal
		// URL): only the class of the failure and the host reach the status.
		err = kubeconfig.Failure(kubeconfig.HostOf(target.Config), err)
	}
	return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, fmt.Errorf("cluster %s: %w", target.Name, err))
}

// rotateAt is when the current credential is renewed: a fraction into its lifetime.
func (r *Reconciler) rotateAt(kr *operatorv1alpha1.KubeconfigRequest) time.Time {
	if kr.Status.IssuedAt == nil || kr.Status.ExpirationTimestamp == nil {
		return time.Time{}
	}
	life := kr.Status.ExpirationTimestamp.Sub(kr.Status.IssuedAt.Time)
	return kr.Status.IssuedAt.Add(time.Duration(float64(life) * r.opts.RotateFraction))
}

// applyRBAC applies the ServiceAccount, Role/RoleBinding and ClusterRole/Binding.
func (r *Reconciler) applyRBAC(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *Target) error {
	name := targetName(kr)
	labels, annotations := requestLabels(kr), requestAnnotations(kr)
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: TargetNamespace}}
	if err := t.ensureNamespace(ctx); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: TargetNamespace, Labels: labels, Annotations: annotations}},
	}
	if kr.Spec.ClusterRole != nil {
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}, Rules: toRBAC(kr.Spec.ClusterRole.Rules)},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject})
	}
	if kr.Spec.Role != nil {
		ns := kr.Spec.Role.Namespace
		objs = append(objs,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations}, Rules: toRBAC(kr.Spec.Role.Rules)},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject})
	}
	// The objects do not depend on each other (a binding may name a role that is not there
	// yet), so they are applied at once.
	var g errgroup.Group
	for _, obj := range objs {
		g.Go(func() error { return createOrApply(ctx, t.Client, obj, kr.Status.IssuedAt == nil) })
	}
	return g.Wait()
}

// requestLabels identify the request on every object made for it in a target cluster.
func requestLabels(kr *operatorv1alpha1.KubeconfigRequest) map[string]string {
	labels := map[string]string{RequestLabel: targetName(kr), RequestNamespaceLabel: kr.Namespace, RequestUIDLabel: string(kr.UID),
		"app.kubernetes.io/managed-by": "trustplane"}
	if len(kr.Name) <= validation.LabelValueMaxLength {
		labels[RequestNameLabel] = kr.Name
	}
	return labels
}

// requestAnnotations name the request in full (its name may not fit a label value).
func requestAnnotations(kr *operatorv1alpha1.KubeconfigRequest) map[string]string {
	return map[string]string{RequestAnnotation: kr.Namespace + "/" + kr.Name}
}

// issue binds a new token to a fresh binding Secret in the target, so that deleting the
// binding revokes exactly this request's token, and publishes the kubeconfig. It returns
// the binding's name.
func (r *Reconciler) issue(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *Target, now time.Time) (string, error) {
	name := targetName(kr)
	// The server may shorten the lifetime, never lengthen it: the requested expiry is a
	// safe time to delete the binding.
	annotations := requestAnnotations(kr)
	annotations[expiresAnnotation] = now.Add(time.Duration(kr.Spec.Expiration) * time.Second).UTC().Format(time.RFC3339)
	binding := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: TargetNamespace,
		Labels: requestLabels(kr), Annotations: annotations}}
	if err := t.Client.Create(ctx, binding); err != nil {
		return "", targetUnreachable(t, status.WriteFailed("create token binding", binding, err))
	}
	tr, err := t.Kube.CoreV1().ServiceAccounts(TargetNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(kr.Spec.Expiration),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: binding.Name, UID: binding.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", targetUnreachable(t, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", TargetNamespace, name, err))
	}
	raw, err := access.Kubeconfig(t.Name, t.endpoint(), name, tr.Status.Token)
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: secretName(kr), Namespace: kr.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kr, operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))}},
		Data: map[string][]byte{"kubeconfig": raw}}
	if err := createOrApply(ctx, r.Client, secret, kr.Status.IssuedAt == nil); err != nil {
		// The token was never handed out: revoke it now rather than leave its binding
		// until the next rotation prunes it (best effort; every retry issues a new one).
		_ = t.Client.Delete(ctx, binding)
		return "", fmt.Errorf("publishing the kubeconfig: %w", err)
	}
	kr.Status.Kubeconfig = base64.StdEncoding.EncodeToString(raw)
	kr.Status.SecretName = secret.Name
	kr.Status.ExpirationTimestamp = &metav1.Time{Time: tr.Status.ExpirationTimestamp.Time}
	kr.Status.IssuedAt = &metav1.Time{Time: now.Truncate(time.Second)}
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonIssued, "Issue", "issued a kubeconfig for cluster %s, valid until %s", t.Name, tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
	return binding.Name, nil
}

// pruneBindings deletes bindings whose tokens have expired, keeping two: current, the
// binding of the credential just issued, and the newest other one (until it expires: the
// credential current replaced).
func (r *Reconciler) pruneBindings(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *Target, current string, now time.Time) error {
	list := &corev1.SecretList{}
	if err := t.Client.List(ctx, list, client.InNamespace(TargetNamespace), client.MatchingLabels{RequestLabel: targetName(kr)}); err != nil {
		return fmt.Errorf("listing token bindings: %w", err)
	}
	// Newest first by when their tokens expire: creation timestamps have a resolution of a
	// second, too coarse to order rotations that follow each other quickly.
	// A binding without a readable expiry sorts last and is pruned by count only.
	expiry := func(s *corev1.Secret) time.Time {
		expires, _ := time.Parse(time.RFC3339, s.Annotations[expiresAnnotation])
		return expires
	}
	// The current one first, whatever its expiry: credentials issued within the same
	// second (the target moved twice, say) tie on both.
	sort.SliceStable(list.Items, func(i, j int) bool {
		if ci, cj := list.Items[i].Name == current, list.Items[j].Name == current; ci != cj {
			return ci
		}
		ei, ej := expiry(&list.Items[i]), expiry(&list.Items[j])
		if !ei.Equal(ej) {
			return ei.After(ej)
		}
		return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
	})
	for i := range list.Items {
		if expires := expiry(&list.Items[i]); i >= 2 || (!expires.IsZero() && now.After(expires)) {
			if err := client.IgnoreNotFound(t.Client.Delete(ctx, &list.Items[i])); err != nil {
				return status.WriteFailed("delete", &list.Items[i], err)
			}
		}
	}
	return nil
}

// revoke withdraws the kubeconfig: at once from the status and the published Secret, even
// when the target cannot be reached; then the token bindings (the target API server
// rejects their tokens from then on), the ServiceAccount and the roles in the target.
// Nothing is issued while revoke is "true".
func (r *Reconciler) revoke(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	had := kr.Status.Kubeconfig != ""
	var err error
	if held := grantedIn(kr); held != nil {
		err = r.withdraw(ctx, kr, *held)
		if err != nil {
			err = fmt.Errorf("revoked: the kubeconfig is gone from the status and the Secret; deleting its token bindings, ServiceAccount and roles in Cluster %s is pending (its token stays valid there until then): %w", held, err)
		}
	} else {
		err = r.unpublish(ctx, kr)
	}
	if had && kr.Status.Kubeconfig == "" {
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonRevoked, "Revoke", "revoked the kubeconfig for cluster %s", kr.Spec.Cluster)
	}
	if err != nil {
		// Not Ready whatever generation was: the credential this generation was Ready
		// with is revoked.
		status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonRevokePending, "")
		return status.Transient(operatorv1alpha1.ReasonRevokePending, err)
	}
	status.MarkNotReady(kr, operatorv1alpha1.ReasonRevoked, "revoked; set "+operatorv1alpha1.RevokeAnnotation+` to "false" to issue a new kubeconfig`)
	return nil
}

// unpublish clears the kubeconfig from the status and deletes the published Secret: the
// management cluster's part of a withdrawal, which never waits for a target cluster.
func (r *Reconciler) unpublish(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	taken, err := r.secretNameTaken(ctx, kr)
	if err != nil {
		return err
	}
	if !taken { // someone else's Secret of that name is never deleted
		published := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kr.Namespace, Name: secretName(kr)}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, published)); err != nil {
			return status.WriteFailed("delete", published, err)
		}
	}
	kr.Status.Kubeconfig, kr.Status.SecretName, kr.Status.ExpirationTimestamp, kr.Status.IssuedAt = "", "", nil, nil
	return nil
}

// withdraw unpublishes the kubeconfig and deletes everything the request holds in the
// Cluster at key, found by label: token bindings first (their tokens die with them), then
// the ServiceAccount, then roles and bindings in every namespace. A Cluster that is gone,
// or is going with no way in left, has nothing more to withdraw (an event says so).
func (r *Reconciler) withdraw(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) error {
	if err := r.unpublish(ctx, kr); err != nil {
		return err
	}
	report, err := r.reporter(ctx, kr, key)
	if err != nil {
		return err
	}
	t, err := r.Targets(ctx, key)
	switch {
	case errors.Is(err, errClusterGone):
		// A Cluster waits for the requests holding grants in it before it goes, so this is
		// a cluster that never was.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, "ClusterGone", "Withdraw", "%v: nothing to clean up", err)
	case errors.Is(err, errNoWayIn):
		// Holding on would hold the Cluster, and with it its namespace, for ever.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, "TargetNotCleanedUp", "Withdraw",
			"%v: the ServiceAccount, roles and bindings labelled %s=%s stay in the target", report(err), RequestLabel, targetName(kr))
	case err != nil:
		return report(err)
	default:
		// Left unclassified: the caller says what is pending (a persistent refusal by the
		// target, RBAC there say, is still recognised as one).
		if err := deleteEverything(ctx, t.Client, targetName(kr)); err != nil {
			if t.tenantServer {
				err = kubeconfig.Failure(kubeconfig.HostOf(t.Config), err)
			}
			return report(fmt.Errorf("cluster %s: %w", t.Name, err))
		}
	}
	kr.Status.GrantedIn = nil
	return nil
}

// reporter says how a failure to withdraw from the Cluster at key reaches the request.
// The Cluster named by status.grantedIn is acted on even when it does not grant the
// request's namespace: it may have stopped granting it, and what the request holds there
// must go. A forged status (possible only without the admission policy
// trustplane-status-writers) names such a Cluster too, and the two cannot be told apart.
// Acting there is harmless (deleteEverything touches only objects labelled with this
// request's own targetName), but what happens there is about someone else's Cluster: its
// kubeconfig, its server, its Shoot. So for a Cluster that does not grant the request's
// namespace, the request learns only that the withdrawal is pending; the cause goes to
// the manager's log.
func (r *Reconciler) reporter(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) (func(error) error, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, key, cluster); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Cluster %s: %w", key, err)
	} else if err != nil || cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
		return func(err error) error { return err }, nil
	}
	return func(err error) error {
		ctrl.LoggerFrom(ctx).Info("withdrawing from a Cluster that does not grant the request's namespace", "cluster", key, "error", err.Error())
		return fmt.Errorf("cluster %s does not grant namespace %s: the cause is in the manager's log, not reported here", key, kr.Namespace)
	}, nil
}

// deleteEverything deletes what the request named name holds in a target cluster.
func deleteEverything(ctx context.Context, c client.Client, name string) error {
	selector := client.MatchingLabels{RequestLabel: name}
	if err := c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the token bindings in %s: %w", TargetNamespace, err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ServiceAccount{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the ServiceAccount in %s: %w", TargetNamespace, err)
	}
	return deleteRBAC(ctx, c, name, "", false)
}

// deleteRBAC deletes the request's Roles and RoleBindings in every namespace but
// keepRoleIn, and its ClusterRoles and ClusterRoleBindings unless keepClusterRole, found by
// label: whatever namespace an earlier spec named, its grants are found.
func deleteRBAC(ctx context.Context, c client.Client, name, keepRoleIn string, keepClusterRole bool) error {
	selector := client.MatchingLabels{RequestLabel: name}
	lists := []client.ObjectList{&rbacv1.RoleBindingList{}, &rbacv1.RoleList{}}
	if !keepClusterRole {
		lists = append(lists, &rbacv1.ClusterRoleBindingList{}, &rbacv1.ClusterRoleList{})
	}
	for _, list := range lists {
		if err := c.List(ctx, list, selector); err != nil {
			return fmt.Errorf("listing %T by label %s=%s: %w", list, RequestLabel, name, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			obj := o.(client.Object)
			if obj.GetNamespace() != "" && obj.GetNamespace() == keepRoleIn {
				continue
			}
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return status.WriteFailed("delete", obj, err)
			}
		}
	}
	return nil
}

// secretName is the Secret the kubeconfig is published in.
func secretName(kr *operatorv1alpha1.KubeconfigRequest) string { return kr.Name + publishedNameSuffix }

// secretNameTaken says whether a Secret of the published name exists that this request
// does not control (a user's, say a brought-along cluster's admin kubeconfig): it is
// never overwritten or deleted. Read from the metadata cache: no API call.
func (r *Reconciler) secretNameTaken(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: kr.Namespace, Name: secretName(kr)}, existing); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !metav1.IsControlledBy(existing, kr), nil
}

// finalize withdraws what the request holds in the Cluster its grants live in.
func (r *Reconciler) finalize(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	if !controllerutil.ContainsFinalizer(kr, Finalizer) {
		return nil
	}
	if held := grantedIn(kr); held != nil {
		if err := r.withdraw(ctx, kr, *held); err != nil {
			// Keep the finalizer: the target must be cleaned up.
			return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, err)
		}
	}
	return r.dropFinalizer(ctx, kr)
}

func (r *Reconciler) dropFinalizer(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	controllerutil.RemoveFinalizer(kr, Finalizer)
	return client.IgnoreNotFound(status.WriteFailed("update", kr, r.Client.Update(ctx, kr)))
}

var (
	// errClusterGone: the request's Cluster does not exist (any more).
	errClusterGone = errors.New("cluster not found")
	// errNoWayIn: the Cluster is going and its kubeconfig went first (its namespace is
	// being deleted, say): nothing will let us into the target again.
	errNoWayIn = errors.New("no way into the target cluster any more")
)

// target connects to the request's cluster: a brought-along one through its kubeconfig
// Secret, a Gardener one through a short-lived admin kubeconfig kept in memory only. A
// Cluster that cannot be connected to yet is waited for: the Cluster watch (and the
// kubeconfig Secret watch) bring the request back when that changes.
func (r *Reconciler) target(ctx context.Context, key types.NamespacedName) (*Target, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, key, cluster); apierrors.IsNotFound(err) {
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %s: %w", key, errClusterGone)
	} else if err != nil {
		return nil, fmt.Errorf("reading Cluster %s: %w", key, err)
	}
	if cluster.Spec.KubeconfigSecretRef != nil {
		return r.broughtAlongTarget(ctx, cluster)
	}
	return r.shootTarget(ctx, cluster)
}

// broughtAlongTarget reuses the connection while the kubeconfig Secret is unchanged; its
// version comes from the metadata cache, its content is read uncached only on change.
func (r *Reconciler) broughtAlongTarget(ctx context.Context, cluster *operatorv1alpha1.Cluster) (*Target, error) {
	ref := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Spec.KubeconfigSecretRef.Name}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, ref, secretMeta); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the kubeconfig Secret %s of cluster %q: %w", ref.Name, cluster.Name, err)
		}
		if cluster.DeletionTimestamp.IsZero() {
			return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q: its kubeconfig Secret %s does not exist", cluster.Name, ref.Name)
		}
		if t, ok := r.targets.Load(cluster.UID); ok {
			return t.(*Target), nil // the connection made before still gets in to clean up
		}
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is being deleted and its kubeconfig Secret is gone: %w", cluster.Name, errNoWayIn)
	}
	if t, ok := r.targets.Load(cluster.UID); ok && t.(*Target).version == secretMeta.ResourceVersion {
		return t.(*Target), nil
	}
	cfg, err := clusterctrl.BroughtAlongConfig(ctx, r.APIReader, cluster)
	if clusterctrl.IsKubeconfigUnusable(err) {
		// The Cluster reports it (and stalls); fixing the Secret brings the request back.
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q: %w", cluster.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster.Name, err)
	}
	return r.connect(cluster, secretMeta.ResourceVersion, cfg, time.Time{}, true)
}

// shootTarget asks Gardener for an admin kubeconfig and reuses it for half its lifetime.
func (r *Reconciler) shootTarget(ctx context.Context, cluster *operatorv1alpha1.Cluster) (*Target, error) {
	if r.Garden == nil {
		return nil, status.Stalled(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is a Gardener cluster and the operator runs without --garden-kubeconfig", cluster.Name)
	}
	provisioned := meta.FindStatusCondition(cluster.Status.Conditions, operatorv1alpha1.ConditionProvisioned)
	if provisioned == nil || provisioned.Status != metav1.ConditionTrue || cluster.Status.ShootName == "" {
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is not provisioned yet", cluster.Name)
	}
	// The Shoot is the one the Cluster controller names for this Cluster, never what the
	// status says: a status can be forged by whoever may write clusters/status, and the
	// garden project is shared by every tenant.
	shootName := shoot.Name(cluster.Namespace, cluster.Name)
	if cluster.Status.ShootName != shootName {
		return nil, status.Stalled(operatorv1alpha1.ReasonShootMismatch, "cluster %s/%s: status.shootName %q is not this Cluster's shoot %q: no kubeconfig is issued for another shoot",
			cluster.Namespace, cluster.Name, cluster.Status.ShootName, shootName)
	}
	now := r.opts.Clock.Now()
	if t, ok := r.targets.Load(cluster.UID); ok && now.Before(t.(*Target).refreshAt) {
		return t.(*Target), nil
	}
	if err := r.checkShootOwner(ctx, cluster, shootName); err != nil {
		return nil, err
	}
	cfg, expires, err := r.Garden.AdminConfig(ctx, shootName)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster.Name, err)
	}
	previous, _ := r.targets.Load(cluster.UID)
	t, err := r.connect(cluster, "", cfg, now.Add(expires.Sub(now)/2), false)
	if err == nil && previous != nil && previous.(*Target).endpoint().Moved(t.endpoint()) != "" {
		r.bringBackRequestsOf(ctx, cluster)
	}
	return t, err
}

// bringBackRequestsOf has every request of the Cluster reconciled again (a brought-along
// Cluster's do not need it: the watch on its kubeconfig Secret brings them back).
func (r *Reconciler) bringBackRequestsOf(ctx context.Context, cluster *operatorv1alpha1.Cluster) {
	select {
	case r.endpointChanges <- event.GenericEvent{Object: cluster}:
	default: // nil (not set up) or full: left to each request's next reconcile
		ctrl.LoggerFrom(ctx).Info("could not bring back the KubeconfigRequests of a Cluster whose endpoint changed", "cluster", cluster.Name)
	}
}

// checkShootOwner: the Shoot carries the owner labels the Cluster controller puts on the
// Shoot of this Cluster. A Shoot of that name made by anyone else (another tool, another
// tenant's Cluster through a hash collision) is not this Cluster's.
func (r *Reconciler) checkShootOwner(ctx context.Context, cluster *operatorv1alpha1.Cluster, shootName string) error {
	s := garden.NewShoot()
	if err := r.Garden.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: shootName}, s); apierrors.IsNotFound(err) {
		return status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q: shoot %s does not exist (yet)", cluster.Name, shootName)
	} else if err != nil {
		return fmt.Errorf("cluster %q: reading shoot %s: %w", cluster.Name, shootName, err)
	}
	l := s.GetLabels()
	if l[shoot.ClusterNamespaceLabel] != cluster.Namespace || l[shoot.ClusterNameLabel] != cluster.Name {
		return status.Stalled(operatorv1alpha1.ReasonShootMismatch, "cluster %s/%s: shoot %s is labelled %s=%q, %s=%q: it is not this Cluster's shoot, no kubeconfig is issued for it",
			cluster.Namespace, cluster.Name, shootName, shoot.ClusterNamespaceLabel, l[shoot.ClusterNamespaceLabel], shoot.ClusterNameLabel, l[shoot.ClusterNameLabel])
	}
	return nil
}

// connect makes the connection to cluster and caches it in place of the one before; a
// zero refreshAt never expires.
func (r *Reconciler) connect(cluster *operatorv1alpha1.Cluster, version string, cfg *rest.Config, refreshAt time.Time, tenantServer bool) (*Target, error) {
	if cfg.Timeout == 0 { // a brought-along target's comes from --cluster-target-timeout
		cfg.Timeout = 15 * time.Second
	}
	// client-go's default of 5 requests/s would serialise a burst of requests. As for its
	// own connection (controller-runtime's default), client-side rate limiting is off: the
	// target API server protects itself with priority and fairness.
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: r.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if refreshAt.IsZero() {
		refreshAt = time.Unix(1<<62, 0)
	}
	t := &Target{Name: cluster.Name, Config: cfg, Client: c, Kube: kube, version: version, refreshAt: refreshAt, tenantServer: tenantServer}
	r.targets.Store(cluster.UID, t)
	return t, nil
}

func (r *Reconciler) requestsForCluster(ctx context.Context, o client.Object) []reconcile.Request {
	list := &operatorv1alpha1.KubeconfigRequestList{}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	if err := r.Client.List(ctx, list, client.MatchingFields{clusterctrl.RequestsByCluster: key.String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the KubeconfigRequests of a Cluster", "cluster", key)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, kr := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: kr.Namespace, Name: kr.Name}}
	}
	return out
}

// requestsUsingKubeconfigSecret maps a Secret to the requests of the brought-along
// Clusters whose kubeconfig it is.
func (r *Reconciler) requestsUsingKubeconfigSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	clusters := &operatorv1alpha1.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(secret.GetNamespace()), client.MatchingFields{clusterctrl.ClustersByKubeconfigRef: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Clusters of a kubeconfig Secret", "secret", secret.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range clusters.Items {
		out = append(out, r.requestsForCluster(ctx, &clusters.Items[i])...)
	}
	return out
}

// requestPublishingIn maps a Secret to the request that publishes its kubeconfig under
// that name, if any.
func requestPublishingIn(_ context.Context, secret client.Object) []reconcile.Request {
	name, ok := strings.CutSuffix(secret.GetName(), publishedNameSuffix)
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: secret.GetNamespace(), Name: name}}}
}

// targetName is the name of the request's objects in the target cluster: unique per
// namespace/name of the request, within the 63 characters labels allow.
func targetName(kr *operatorv1alpha1.KubeconfigRequest) string {
	sum := sha256.Sum256([]byte(kr.Namespace + "/" + kr.Name))
	base := "kcr-" + kr.Namespace + "-" + kr.Name
	if len(base) > 50 {
		base = base[:50]
	}
	return strings.TrimRight(base, "-.") + "-" + hex.EncodeToString(sum[:4])
}

func toRBAC(rules []operatorv1alpha1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
	}
	return out
}

// createOrApply applies obj; for a request never issued before it first tries a plain
// create, which costs the API server about half of an apply that creates, and falls back
// to the apply when the object is already there.
func createOrApply(ctx context.Context, c client.Client, obj client.Object, fresh bool) error {
	if fresh {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner))
		if !apierrors.IsAlreadyExists(err) {
			return status.WriteFailed("create", obj, err)
		}
	}
	return status.WriteFailed("apply", obj, apply.Apply(ctx, c, obj, FieldOwner))
}
