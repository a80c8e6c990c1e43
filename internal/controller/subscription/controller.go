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
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/shoot"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/subscription"
)

const (
	// Name is the controller's name in --controllers.
	Name = "subscription"
	// Finalizer releases the credential before the request goes.
	Finalizer = "subscription.trustplane.io/release"

	// ReasonWaitingForShoot (Reconciling, deleting): the request's own Shoot still uses
	// the credential; whether it becomes dirty is decided once the Shoot is gone.
	ReasonWaitingForShoot = "WaitingForShoot"
	// reasonReleased (event): a dedicated credential was marked dirty on release.
	reasonReleased = "Released"
)

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

// Controller is the registry entry for `trustplane manager`; the garden options are the
// cluster controller's (it registers their flags).
func Controller(gardenOpts *garden.Options) manager.Controller {
	source, poolNamespace := PoolAuto, DefaultPoolNamespace
	return manager.Controller{
		Name: Name, Help: "SubscriptionRequest: hyperscaler credentials from the garden's CredentialsBindings (or labelled Secrets), shared or dedicated",
		AddFlags: func(fs *pflag.FlagSet) {
			fs.StringVar(&source, "subscription-pool", source, "Where the credential pool is: 'garden' (CredentialsBindings in --garden-namespace), "+
				"'secrets' (labelled Secrets in --subscription-pool-namespace; for tests and small setups), or 'auto' (garden when --garden-kubeconfig is set).")
			fs.StringVar(&poolNamespace, "subscription-pool-namespace", poolNamespace, "Namespace of the management cluster holding the Secret pool (--subscription-pool=secrets); "+
				"tenants must not be able to write Secrets there.")
		},
		Setup: gardenOpts.Setup(func(mgr ctrl.Manager, g *garden.Garden) error {
			if errs := validation.IsDNS1123Label(poolNamespace); len(errs) > 0 {
				return fmt.Errorf("--subscription-pool-namespace=%q: not a namespace name: %s", poolNamespace, strings.Join(errs, "; "))
			}
			var err error
			switch {
			case source == PoolGarden && g == nil:
				return errors.New("--subscription-pool=garden needs --garden-kubeconfig")
			case source == PoolGarden, source == PoolAuto && g != nil:
				_, err = SetupWithGarden(mgr, g)
			case source == PoolSecrets, source == PoolAuto:
				_, err = SetupWithPoolNamespace(mgr, poolNamespace)
			default:
				return fmt.Errorf("--subscription-pool=%q: want garden, secrets or auto", source)
			}
			return err
		}),
	}
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

// exhausted says where the pool is, what a credential needs, and how to hand back a
// dirty one that would serve (docs/provisioning.md, "Releasing").
func (p *pool) exhausted(sr *cp.SubscriptionRequest, err error) string {
	resource := "secret"
	if p.gvk == CredentialsBindingGVK {
		resource = "credentialsbinding"
	}
	msg := fmt.Sprintf("%v, in the %ss of namespace %q", err, resource, p.namespaceFor(sr))
	var ex *subscription.ExhaustedError
	if errors.As(err, &ex) && len(ex.Dirty) > 0 {
		msg += fmt.Sprintf("; dirty, and would serve once its account is cleaned: %s (hand one back with `kubectl -n %s label %s %s dirty- tenantName-`)",
			strings.Join(ex.Dirty, ", "), p.namespaceFor(sr), resource, ex.Dirty[0])
	}
	return msg
}

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
	Client   client.Client // SubscriptionRequests in the management cluster
	Recorder events.EventRecorder
	// Pool is the cache of the pool's entries, as metadata only.
	Pool client.Reader
	pool *pool
}

// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Setup adds the controller to mgr with the Secret pool in DefaultPoolNamespace.
func Setup(mgr ctrl.Manager) (*Reconciler, error) {
	return SetupWithPoolNamespace(mgr, DefaultPoolNamespace)
}

// SetupWithPoolNamespace adds the controller to mgr with the Secret pool: labelled
// Secrets in namespace of the management cluster, which serve requests of every namespace.
func SetupWithPoolNamespace(mgr ctrl.Manager, namespace string) (*Reconciler, error) {
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
	if err := mgr.Add(secrets); err != nil {
		return nil, err
	}
	if _, err := secrets.GetInformer(context.Background(), entry); err != nil {
		return nil, err
	}
	p.cache = secrets
	return setup(mgr, p, nil)
}

// SetupWithGarden adds the controller to mgr with the garden's pool: CredentialsBindings
// in the project namespace, usage counted from the project's Shoots.
func SetupWithGarden(mgr ctrl.Manager, g *garden.Garden) (*Reconciler, error) {
	p := &pool{gvk: CredentialsBindingGVK, namespace: g.Params.Namespace, cache: g.Cache, writer: g.Client, fresh: g.APIReader, shoots: g.Cache}
	return setup(mgr, p, g)
}

func setup(mgr ctrl.Manager, p *pool, g *garden.Garden) (*Reconciler, error) {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Pool: p.cache, pool: p}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&cp.SubscriptionRequest{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(p.cache, client.Object(p.newEntry("", "")), handler.EnqueueRequestsFromMapFunc(r.waitingRequests))).
		// Grants are read from Namespaces' metadata; granting an account brings back the
		// namespace's waiting requests.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.waitingRequestsOfNamespace), builder.OnlyMetadata, builder.WithPredicates(grantsChanged))
	if g != nil {
		// A release waits for the request's own Shoot to go: only deletions matter.
		b = b.WatchesRawSource(source.Kind(g.Cache, garden.NewShoot(), handler.TypedEnqueueRequestsFromMapFunc(requestOfShoot), predicate.TypedFuncs[*unstructured.Unstructured]{
			CreateFunc: func(event.TypedCreateEvent[*unstructured.Unstructured]) bool { return false },
			UpdateFunc: func(event.TypedUpdateEvent[*unstructured.Unstructured]) bool { return false },
		})).
			// As for the Cluster controller: a garden that does not answer at start holds up
			// this controller only, not the manager.
			WithOptions(controller.Options{CacheSyncTimeout: waitForGardenForever})
	}
	return r, b.Complete(r)
}

// waitForGardenForever is long enough to mean "until the garden answers".
const waitForGardenForever = 100 * 365 * 24 * time.Hour

// requestOfShoot maps a Shoot to the SubscriptionRequest of its Cluster (named as the Cluster).
func requestOfShoot(_ context.Context, s *unstructured.Unstructured) []reconcile.Request {
	l := s.GetLabels()
	if l[shoot.ClusterNamespaceLabel] == "" || l[shoot.ClusterNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[shoot.ClusterNamespaceLabel], Name: l[shoot.ClusterNameLabel]}}}
}

// Reconcile assigns (or keeps, or releases) one request's credential.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sr := &cp.SubscriptionRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patcher := status.NewPatcher(sr)
	return patcher.Finish(ctx, r.Client, r.Recorder, reconcile.Result{}, r.reconcile(ctx, sr))
}

func (r *Reconciler) reconcile(ctx context.Context, sr *cp.SubscriptionRequest) error {
	if !sr.DeletionTimestamp.IsZero() {
		return r.release(ctx, sr)
	}
	if controllerutil.AddFinalizer(sr, Finalizer) {
		if err := r.Client.Update(ctx, sr); err != nil {
			return status.WriteFailed("update", sr, err)
		}
	}
	want, err := requestOf(sr)
	if err != nil {
		return status.Stalled(cp.ReasonInvalidSelector, "%v", err)
	}
	if sr.Status.GardenerSecretName != "" && r.stillFits(ctx, sr, want) {
		// Kept even when the grant has gone since: revoking stops new claims, it does not
		// take a running cluster's credential away.
		assigned(sr, sr.Status.GardenerSecretName)
		return nil
	}
	if want.Tenant != "" {
		if err := r.checkGrant(ctx, sr, want.Tenant); err != nil {
			sr.Status.GardenerSecretName = ""
			return err
		}
	}
	return r.assign(ctx, sr, want)
}

// requestOf is what sr asks for.
func requestOf(sr *cp.SubscriptionRequest) (subscription.Request, error) {
	tenant, err := subscription.ParseSelector(sr.Spec.SubscriptionSelector)
	if err != nil {
		return subscription.Request{}, err
	}
	return subscription.Request{Provider: sr.Spec.Provider, Region: sr.Spec.Region, Tenant: tenant, EUAccess: sr.Spec.EUAccess}, nil
}

// checkGrant lets a request have a dedicated credential only for a global account its
// namespace is granted: the global account is whatever the request says, so without a
// grant one tenant could claim every free credential with made-up accounts. The grant is
// the operator's annotation on the Namespace, which tenants cannot write; requests in the
// operator's own namespace need none.
func (r *Reconciler) checkGrant(ctx context.Context, sr *cp.SubscriptionRequest, account string) error {
	if sr.Namespace == r.pool.operatorNamespace {
		return nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: sr.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading the grants of namespace %s: %w", sr.Namespace, err)
	}
	grants := ns.Annotations[cp.AnnotationGlobalAccounts]
	if subscription.Granted(grants, account) {
		return nil
	}
	// The Namespace watch brings the request back when its grants change.
	return status.Waiting(cp.ReasonGlobalAccountNotGranted,
		"global account %s is not granted to namespace %s, so no dedicated credential is claimed for it; the operator grants it with: kubectl annotate namespace %s %s=%q --overwrite",
		account, sr.Namespace, sr.Namespace, cp.AnnotationGlobalAccounts, subscription.Grant(grants, account)).Warn()
}

// assign claims a credential for the request. A claim lost to a concurrent one (another
// request, another replica) is retried at once with a fresh, uncached view of the pool.
func (r *Reconciler) assign(ctx context.Context, sr *cp.SubscriptionRequest, want subscription.Request) error {
	reader := client.Reader(r.pool.cache)
	for range 5 {
		name, claim, err := r.choose(ctx, reader, sr, want)
		if errors.Is(err, subscription.ErrPoolExhausted) {
			sr.Status.GardenerSecretName = ""
			// The pool watch brings the request back when a credential appears.
			return status.Waiting(cp.ReasonPoolExhausted, "%s; waiting for the pool to change", r.pool.exhausted(sr, err)).Warn()
		}
		if err != nil {
			return err
		}
		if claim {
			if err := r.claim(ctx, r.pool.namespaceFor(sr), name, want.Tenant, sr); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					reader = r.pool.fresh // someone else was faster: look again, uncached
					continue
				}
				return err
			}
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, cp.ReasonAssigned, "Assign", "assigned credential %s", name)
		assigned(sr, name)
		return nil
	}
	return fmt.Errorf("lost the race for a %s credential five times; retrying", sr.Spec.Provider)
}

func assigned(sr *cp.SubscriptionRequest, name string) {
	sr.Status.GardenerSecretName = name
	status.MarkReady(sr, cp.ReasonAssigned, "credential "+name)
}

// list reads the pool's entries of the pool namespace that may serve requests of namespace
// tenant.
func (r *Reconciler) list(ctx context.Context, reader client.Reader, ns, tenant string) ([]subscription.Credential, error) {
	entries := r.pool.newList()
	if err := reader.List(ctx, entries, client.InNamespace(ns), client.HasLabels{cp.LabelHyperscalerType}); err != nil {
		return nil, fmt.Errorf("listing the pool's %ss in %s: %w", r.pool.gvk.Kind, ns, err)
	}
	out := make([]subscription.Credential, 0, len(entries.Items))
	for _, e := range entries.Items {
		if !claimableBy(&e, tenant) {
			continue // another tenant's: never a candidate, whatever account is asked for
		}
		out = append(out, subscription.Credential{Name: e.Name, Labels: e.Labels})
	}
	return out, nil
}

// claimableBy: the pool entry may serve a request of namespace tenant: a shared one, a
// free one (no tenantName: a claim record left after a hand-back no longer counts), or
// one claimed by tenant. A dedicated one claimed from another namespace, or labelled
// tenantName with no record of whose it is, serves no one else.
func claimableBy(e *metav1.PartialObjectMetadata, tenant string) bool {
	if e.Labels[cp.LabelShared] == "true" && e.Labels[cp.LabelInternal] != "true" {
		return true
	}
	if _, claimed := e.Labels[cp.LabelTenantName]; !claimed {
		return true
	}
	return claimedBy(e, tenant)
}

// claimedBy: the pool entry is a dedicated credential claimed for namespace tenant:
// labelled tenantName, with tenant's claim record.
func claimedBy(e *metav1.PartialObjectMetadata, tenant string) bool {
	if _, claimed := e.Labels[cp.LabelTenantName]; !claimed {
		return false
	}
	ns, _, _ := strings.Cut(e.Annotations[cp.AnnotationClaimedBy], "/")
	return ns != "" && ns == tenant
}

func (r *Reconciler) choose(ctx context.Context, reader client.Reader, sr *cp.SubscriptionRequest, want subscription.Request) (string, bool, error) {
	credentials, err := r.list(ctx, reader, r.pool.namespaceFor(sr), sr.Namespace)
	if err != nil {
		return "", false, err
	}
	var usage map[string]int
	if want.Tenant == "" {
		users, err := r.users(ctx, r.pool.namespaceFor(sr))
		if err != nil {
			return "", false, err
		}
		usage = make(map[string]int, len(users))
		for name, u := range users {
			usage[name] = len(u)
		}
	}
	return subscription.Choose(want, credentials, usage)
}

// users are, per credential, who uses it: requests assigned to it ("<namespace>/<name>")
// and, with the garden pool, the project's Shoots that reference it (a Shoot of a Cluster
// counts as that Cluster's request, named as the Cluster; any other Shoot, KEB's say, as
// itself). The pool serves requests of every namespace.
func (r *Reconciler) users(ctx context.Context, poolNamespace string) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	add := func(credential, user string) {
		if out[credential] == nil {
			out[credential] = map[string]bool{}
		}
		out[credential][user] = true
	}
	requests := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, requests); err != nil {
		return nil, fmt.Errorf("listing SubscriptionRequests: %w", err)
	}
	for _, sr := range requests.Items {
		if n := sr.Status.GardenerSecretName; n != "" {
			add(n, sr.Namespace+"/"+sr.Name)
		}
	}
	if r.pool.shoots == nil {
		return out, nil
	}
	shoots := &unstructured.UnstructuredList{}
	shoots.SetGroupVersionKind(shoot.GVK.GroupVersion().WithKind("ShootList"))
	if err := r.pool.shoots.List(ctx, shoots, client.InNamespace(poolNamespace)); err != nil {
		return nil, fmt.Errorf("listing the Shoots of %s: %w", poolNamespace, err)
	}
	for _, s := range shoots.Items {
		n, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName")
		if n == "" {
			continue
		}
		add(n, shootUser(&s))
	}
	return out, nil
}

// shootUser names the user a Shoot stands for: its Cluster's request, or itself.
func shootUser(s *unstructured.Unstructured) string {
	l := s.GetLabels()
	if ns, name := l[shoot.ClusterNamespaceLabel], l[shoot.ClusterNameLabel]; ns != "" && name != "" {
		return ns + "/" + name
	}
	return "shoot " + s.GetNamespace() + "/" + s.GetName()
}

// claim labels a free credential for the global account tenant and records the
// requesting namespace as its owner. The patch carries the resourceVersion read, so of
// two concurrent claims exactly one succeeds; the other gets a conflict.
func (r *Reconciler) claim(ctx context.Context, ns, name, tenant string, sr *cp.SubscriptionRequest) error {
	entry := r.pool.newEntry(ns, name)
	if err := r.pool.fresh.Get(ctx, client.ObjectKeyFromObject(entry), entry); err != nil {
		return err
	}
	if t, claimed := entry.Labels[cp.LabelTenantName]; (claimed && t != tenant) || !claimableBy(entry, sr.Namespace) {
		return apierrors.NewConflict(schema.GroupResource{Group: r.pool.gvk.Group, Resource: r.pool.gvk.Kind}, name, errors.New("claimed by another tenant"))
	}
	before := entry.DeepCopy()
	if entry.Labels == nil {
		entry.Labels = map[string]string{}
	}
	if entry.Annotations == nil {
		entry.Annotations = map[string]string{}
	}
	entry.Labels[cp.LabelTenantName] = tenant
	entry.Annotations[cp.AnnotationClaimedBy] = sr.Namespace + "/" + sr.Name
	return status.WriteFailed("patch", entry, r.pool.writer.Patch(ctx, entry, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// patchLabel sets one label of entry with a merge patch that carries entry's
// resourceVersion: a concurrent change makes it fail with a conflict.
func (r *Reconciler) patchLabel(ctx context.Context, entry *metav1.PartialObjectMetadata, key, value string) error {
	before := entry.DeepCopy()
	if entry.Labels == nil {
		entry.Labels = map[string]string{}
	}
	entry.Labels[key] = value
	err := r.pool.writer.Patch(ctx, entry, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	return status.WriteFailed("patch", entry, err)
}

// stillFits: the assigned credential exists and still serves the request.
func (r *Reconciler) stillFits(ctx context.Context, sr *cp.SubscriptionRequest, want subscription.Request) bool {
	entry := r.pool.newEntry(r.pool.namespaceFor(sr), sr.Status.GardenerSecretName)
	if err := r.pool.cache.Get(ctx, client.ObjectKeyFromObject(entry), entry); err != nil {
		return false
	}
	return claimableBy(entry, sr.Namespace) && subscription.Fits(want, subscription.Credential{Name: entry.Name, Labels: entry.Labels})
}

// release marks a dedicated credential dirty once nothing uses it any more: no other
// request, no Shoot (KEB's rule), and waits while the request's own Shoot still exists.
func (r *Reconciler) release(ctx context.Context, sr *cp.SubscriptionRequest) error {
	if !controllerutil.ContainsFinalizer(sr, Finalizer) {
		return nil
	}
	if name := sr.Status.GardenerSecretName; name != "" {
		if err := r.releaseCredential(ctx, sr, name); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(sr, Finalizer)
	return client.IgnoreNotFound(status.WriteFailed("update", sr, r.Client.Update(ctx, sr)))
}

func (r *Reconciler) releaseCredential(ctx context.Context, sr *cp.SubscriptionRequest, name string) error {
	ns := r.pool.namespaceFor(sr)
	entry := r.pool.newEntry(ns, name)
	if err := r.pool.fresh.Get(ctx, client.ObjectKeyFromObject(entry), entry); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading credential %s: %w", name, err)
	}
	want, err := requestOf(sr)
	if err != nil || !claimedBy(entry, sr.Namespace) {
		// A free credential, another tenant's, or a request that could never claim: a
		// status naming it was never this controller's doing (a forged one, say), and
		// releasing it is not this request's to do.
		return nil
	}
	users, err := r.users(ctx, ns)
	if err != nil {
		return err
	}
	self := sr.Namespace + "/" + sr.Name
	others := len(users[name])
	if users[name][self] {
		others--
	}
	ownShoot, err := r.ownShootUses(ctx, sr, name)
	if err != nil {
		return err
	}
	switch subscription.Released(want, subscription.Credential{Name: name, Labels: entry.Labels}, others, ownShoot) {
	case subscription.WaitForShoot:
		// The Shoot watch brings the request back when the Shoot is gone.
		return status.Waiting(ReasonWaitingForShoot, "credential %s is released once the request's Shoot is gone", name)
	case subscription.MarkDirty:
		if err := r.patchLabel(ctx, entry, cp.LabelDirty, "true"); err != nil {
			return err
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, reasonReleased, "Release", "credential %s released and marked dirty", name)
	case subscription.Keep:
	}
	return nil
}

// ownShootUses: a Shoot of the request's Cluster still references the credential.
func (r *Reconciler) ownShootUses(ctx context.Context, sr *cp.SubscriptionRequest, name string) (bool, error) {
	if r.pool.shoots == nil {
		return false, nil
	}
	shoots := &unstructured.UnstructuredList{}
	shoots.SetGroupVersionKind(shoot.GVK.GroupVersion().WithKind("ShootList"))
	if err := r.pool.shoots.List(ctx, shoots, client.InNamespace(r.pool.namespace),
		client.MatchingLabels{shoot.ClusterNamespaceLabel: sr.Namespace, shoot.ClusterNameLabel: sr.Name}); err != nil {
		return false, fmt.Errorf("listing the Shoots of %s: %w", r.pool.namespace, err)
	}
	for _, s := range shoots.Items {
		if n, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName"); n == name {
			return true, nil
		}
	}
	return false, nil
}

// waitingRequests brings back, when the pool changes, the requests it serves that have
// no credential yet or have this one.
func (r *Reconciler) waitingRequests(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requestsWith(ctx, "", o.GetName())
}

// waitingRequestsOfNamespace brings back, when the grants of a Namespace change, its
// requests that have no credential yet.
func (r *Reconciler) waitingRequestsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requestsWith(ctx, o.GetName(), "")
}

// requestsWith lists the requests of namespace (all namespaces for "") that have no
// credential or have credential.
func (r *Reconciler) requestsWith(ctx context.Context, namespace, credential string) []reconcile.Request {
	list := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, sr := range list.Items {
		if n := sr.Status.GardenerSecretName; n == "" || (credential != "" && n == credential) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sr.Namespace, Name: sr.Name}})
		}
	}
	return out
}

// grantsChanged passes Namespaces created with grants, and changes of their grants.
var grantsChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		_, granted := e.Object.GetAnnotations()[cp.AnnotationGlobalAccounts]
		return granted
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[cp.AnnotationGlobalAccounts] != e.ObjectNew.GetAnnotations()[cp.AnnotationGlobalAccounts]
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
