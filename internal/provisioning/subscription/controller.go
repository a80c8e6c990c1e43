// Package subscription is the Subscription operator: it assigns each SubscriptionRequest a
// hyperscaler credential from a pool labelled as kyma-environment-broker labels its
// hyperscaler account pool — the least used shared one, or one dedicated to the request's
// global account, claimed with optimistic concurrency so that no credential is ever
// claimed twice — and marks dedicated credentials dirty once nothing uses them.
//
// The pool is the garden's CredentialsBindings (security.gardener.cloud/v1alpha1) in the
// project namespace, the objects a Shoot's spec.credentialsBindingName names; usage is
// counted from the project's Shoots. For tests and small setups without a garden, the pool
// can be labelled Secrets in one namespace of the management cluster that the operator
// controls (--subscription-pool=secrets, --subscription-pool-namespace), named as the
// CredentialsBindings they stand for — never the requesting namespace: the name chosen
// becomes the Shoot's credentialsBindingName in the shared garden project, so a tenant
// who could put a Secret in the pool could point its cluster at another tenant's account.
//
// A dedicated credential is claimed for the requesting namespace (the tenant,
// cp.AnnotationClaimedBy) and never handed to a request of another namespace; and only for
// a global account the operator grants that namespace (cp.AnnotationGlobalAccounts on the
// Namespace), so that no tenant drains the pool by asking for made-up accounts.
package subscription

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/finalizer"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/status"
)

const (
	// Name is the controller's name in --controllers.
	Name = "subscription"
	// Help is the controller's one-line description in --help.
	Help = "SubscriptionRequest: hyperscaler credentials from the garden's CredentialsBindings (or labelled Secrets), shared or dedicated"
)

// Finalizer releases the credential before the request goes. Requests finalized by earlier
// versions carry "subscription.trustplane.io/release": still honoured, and replaced by
// Finalizer.Name on their next reconcile.
var Finalizer = finalizer.For(Name, "subscription.trustplane.io/release")

// Pool sources (--subscription-pool).
const (
	// PoolAuto is PoolGarden when --garden-kubeconfig is set, else PoolSecrets.
	PoolAuto = "auto"
	// PoolGarden: CredentialsBindings in the garden's project namespace.
	PoolGarden = "garden"
	// PoolSecrets: labelled Secrets in --subscription-pool-namespace of the management cluster.
	PoolSecrets = "secrets"
	// DefaultPoolNamespace is where the Secret pool is by default: Kyma's control-plane
	// namespace, which tenants have no write access to.
	DefaultPoolNamespace = "kcp-system"
)

// CredentialsBindingGVK is Gardener's CredentialsBinding, the garden pool's entries.
var CredentialsBindingGVK = schema.GroupVersionKind{Group: "security.gardener.cloud", Version: "v1alpha1", Kind: "CredentialsBinding"}

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// usesGarden: the pool is the garden's CredentialsBindings, not the Secret pool.
func (o Options) usesGarden() bool {
	return o.Pool == PoolGarden || (o.Pool == PoolAuto && o.Garden != nil)
}

// pool is where the credentials are. Entries are read as metadata only: selection needs
// labels, and credentials never enter the manager's memory.
type pool struct {
	gvk schema.GroupVersionKind
	// namespace is the garden's project namespace, or the Secret pool's namespace: never a
	// requesting namespace.
	namespace string
	// cache holds the entries' metadata and is watched for changes.
	cache cache.Cache
	// writer patches entries' labels; fresh reads them uncached after a lost claim.
	writer client.Client
	fresh  client.Reader
	// shoots lists the project's Shoots, which count as users; nil for the Secret pool.
	shoots client.Reader
	// operatorNamespace holds the operator's own requests, which need no grant of global
	// accounts: the Secret pool's namespace. Empty for the garden pool, whose project
	// namespace is not a namespace of the management cluster: there every namespace
	// needs a grant.
	operatorNamespace string
}

func (p *pool) namespaceFor(*cp.SubscriptionRequest) string { return p.namespace }

func (p *pool) newEntry(ns, name string) *metav1.PartialObjectMetadata {
	e := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	e.SetGroupVersionKind(p.gvk)
	return e
}

func (p *pool) newList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(p.gvk.GroupVersion().WithKind(p.gvk.Kind + "List"))
	return l
}

// Reconciler assigns credentials.
type Reconciler struct {
	Client client.Client // SubscriptionRequests in the management cluster
	// Fresh reads a SubscriptionRequest uncached before a credential is assigned to it.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Pool is the cache of the pool's entries, as metadata only.
	Pool client.Reader
	pool *pool
	// releaseShootTimeout bounds how long a release waits for the request's own Shoot.
	releaseShootTimeout time.Duration
	clock               clock.PassiveClock
	// opts are the options it was set up with (the multi-account limits).
	opts Options
}

// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Setup adds the controller to mgr, with the pool opts name.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.usesGarden() {
		return setup(mgr, gardenPool(opts.Garden), opts)
	}
	p, err := secretPool(mgr, opts.PoolNamespace)
	if err != nil {
		return nil, err
	}
	return setup(mgr, p, opts)
}

// secretPool is the Secret pool: labelled Secrets in namespace of the management cluster,
// which serve requests of every namespace.
func secretPool(mgr ctrl.Manager, namespace string) (*pool, error) {
	inPool, err := labels.NewRequirement(cp.LabelHyperscalerType, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	p := &pool{gvk: secretGVK, namespace: namespace, writer: mgr.GetClient(), fresh: mgr.GetAPIReader(), operatorNamespace: namespace}
	entry := p.newEntry("", "")
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		// Only labelled Secrets, only their metadata; and nothing else: a typed read of a
		// Secret through this cache fails rather than cache every Secret whole.
		ByObject: map[client.Object]cache.ByObject{entry: {Label: labels.NewSelector().Add(*inPool),
			Namespaces: map[string]cache.Config{namespace: {}}}},
		ReaderFailOnMissingInformer: true})
	if err != nil {
		return nil, err
	}
	if err := manager.AddCache(mgr, secrets); err != nil {
		return nil, err
	}
	if _, err := secrets.GetInformer(context.Background(), entry); err != nil {
		return nil, err
	}
	p.cache = secrets
	return p, nil
}

// gardenPool is the garden's pool: CredentialsBindings in the project namespace, usage
// counted from the project's Shoots.
func gardenPool(g *garden.Garden) *pool {
	return &pool{gvk: CredentialsBindingGVK, namespace: g.Params.Namespace, cache: g.Cache, writer: g.Client, fresh: g.APIReader, shoots: g.Cache}
}

func setup(mgr ctrl.Manager, p *pool, opts Options) (*Reconciler, error) {
	var g *garden.Garden
	if opts.usesGarden() {
		g = opts.Garden
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Pool: p.cache, pool: p,
		releaseShootTimeout: opts.ReleaseShootTimeout, clock: opts.Clock, opts: opts}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.releaseShootTimeout <= 0 {
		r.releaseShootTimeout = DefaultOptions().ReleaseShootTimeout
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&cp.SubscriptionRequest{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, status.ReconcileRequested))).
		WatchesRawSource(source.Kind(p.cache, client.Object(p.newEntry("", "")), handler.EnqueueRequestsFromMapFunc(r.waitingRequests))).
		// Grants and the pool's hold are read from Namespaces' metadata; granting an
		// account brings back the namespace's waiting requests, lifting a hold every request.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.requestsOfNamespaceChange), builder.OnlyMetadata, builder.WithPredicates(r.namespaceChanged()))
	if g != nil {
		b = b.WatchesRawSource(source.Kind(g.Cache, garden.NewShoot(), handler.TypedEnqueueRequestsFromMapFunc(requestOfShoot), shootDeleted)).
			// As for the Cluster controller: a garden that does not answer at start holds up
			// this controller only, not the manager.
			WithOptions(controller.Options{CacheSyncTimeout: garden.CacheSyncTimeout})
	}
	if err := b.Complete(r); err != nil {
		return nil, err
	}
	poolInventory.source.Store(r) // the manager's one subscription controller
	return r, nil
}

// Reconcile assigns (or keeps, or releases) one request's credential.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sr := &cp.SubscriptionRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); apierrors.IsNotFound(err) {
		forget(sr, req.NamespacedName) // gone: its series go with it
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	patcher := status.NewPatcher(sr)
	result, err := patcher.Finish(ctx, r.Client, r.Recorder, reconcile.Result{}, r.reconcile(ctx, sr))
	observe(sr) // from the conditions Finish recorded
	return result, err
}

// confirmUnassigned reads the request uncached before a credential is assigned to it: the
// cache may not have the status this controller wrote a moment ago (an event of the
// claimed credential brings the request back at once), and assigning again from that
// stale copy would move the request to another credential and leave the first claimed.
// (Found by the chaos suite, seed 6391000145160845497: a request moved from cred-02 to
// cred-00.) The assignment the API server holds is adopted.
func (r *Reconciler) confirmUnassigned(ctx context.Context, sr *cp.SubscriptionRequest) error {
	current := &cp.SubscriptionRequest{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sr), current); err != nil {
		return fmt.Errorf("reading SubscriptionRequest %s/%s before assigning a credential: %w", sr.Namespace, sr.Name, err)
	}
	sr.Status.GardenerSecretName = current.Status.GardenerSecretName
	return nil
}

func (r *Reconciler) reconcile(ctx context.Context, sr *cp.SubscriptionRequest) error {
	if !sr.DeletionTimestamp.IsZero() {
		return r.release(ctx, sr)
	}
	if err := Finalizer.Ensure(ctx, r.Client, sr); err != nil {
		return err
	}
	want, err := requestOf(sr)
	if err != nil {
		return status.Stalled(cp.ReasonInvalidSelector, "%v", err)
	}
	want.Limit = r.opts.multiAccountLimit(want.Tenant, want.Provider)
	if sr.Status.GardenerSecretName == "" {
		if err := r.confirmUnassigned(ctx, sr); err != nil {
			return err
		}
	}
	if sr.Status.GardenerSecretName != "" {
		fits, err := r.stillFits(ctx, sr, want)
		if err != nil {
			return err
		}
		if fits {
			// Kept even when the grant has gone since: revoking stops new claims, it does
			// not take a running cluster's credential away.
			assigned(sr, sr.Status.GardenerSecretName)
			return nil
		}
	}
	// A hold keeps whatever the request has, even a credential that no longer fits: the
	// claim it holds stays recorded on the credential until it is replaced.
	if err := r.checkHold(ctx, "claiming a credential"); err != nil {
		return err
	}
	if want.Tenant != "" {
		if err := r.checkGrant(ctx, sr, want.Tenant); err != nil {
			sr.Status.GardenerSecretName = ""
			return err
		}
	}
	return r.assign(ctx, sr, want)
}
