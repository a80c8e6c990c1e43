// Package subscription is the Subscription operator: it assigns each SubscriptionRequest a
// hyperscaler credential from a pool of labelled Secrets — the least used shared one, or
// one dedicated to the request's global account, claimed with optimistic concurrency so
// that no credential is ever claimed twice — and marks dedicated credentials dirty when
// their last request goes.
package subscription

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/subscription"
)

const (
	// Name is the controller's name in --controllers.
	Name = "subscription"
	// Finalizer releases the credential before the request goes.
	Finalizer = "subscription.trustplane.io/release"

	secretIndex = ".status.gardenerSecretName"
)

// Controller is the registry entry for `trustplane manager`.
func Controller() manager.Controller {
	return manager.Controller{
		Name: Name, Help: "SubscriptionRequest: hyperscaler credentials from a labelled pool (shared or dedicated)",
		Setup: func(mgr ctrl.Manager) error { _, err := Setup(mgr); return err },
	}
}

// Reconciler assigns credentials.
type Reconciler struct {
	Client    client.Client
	Pool      client.Reader // the private cache of pool Secrets, labels only
	APIReader client.Reader // a fresh view after a lost claim
	Recorder  events.EventRecorder
}

// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update;patch

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager) (*Reconciler, error) {
	inPool, err := labels.NewRequirement(cp.LabelHyperscalerType, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	pool, err := cache.New(mgr.GetConfig(), cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*inPool), Transform: labelsOnly}}})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(pool); err != nil {
		return nil, err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cp.SubscriptionRequest{}, secretIndex, func(o client.Object) []string {
		if n := o.(*cp.SubscriptionRequest).Status.GardenerSecretName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), Pool: pool, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name)}
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&cp.SubscriptionRequest{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(pool, client.Object(&corev1.Secret{}), handler.EnqueueRequestsFromMapFunc(r.waitingRequests))).
		Complete(r)
}

// labelsOnly strips a pool Secret to its metadata before it is cached: selection reads
// labels only, and the credentials (also copied whole into kubectl's last-applied
// annotation) stay out of the manager's memory. Writes start from an uncached read.
func labelsOnly(obj any) (any, error) {
	if s, ok := obj.(*corev1.Secret); ok {
		s.Data, s.StringData, s.Annotations, s.ManagedFields = nil, nil, nil, nil
	}
	return obj, nil
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
	tenant, err := subscription.ParseSelector(sr.Spec.SubscriptionSelector)
	if err != nil {
		return status.Stalled(cp.ReasonInvalidSelector, "%v", err)
	}
	want := subscription.Request{Provider: sr.Spec.Provider, Tenant: tenant, EUAccess: sr.Spec.EUAccess}
	if sr.Status.GardenerSecretName != "" && r.stillFits(ctx, sr, want) {
		assigned(sr, sr.Status.GardenerSecretName)
		return nil
	}
	return r.assign(ctx, sr, want)
}

// assign claims a credential for the request. A claim lost to a concurrent one (another
// request, another replica) is retried at once with a fresh, uncached view of the pool.
func (r *Reconciler) assign(ctx context.Context, sr *cp.SubscriptionRequest, want subscription.Request) error {
	reader := r.Pool
	for attempt := 0; attempt < 5; attempt++ {
		name, err := r.choose(ctx, reader, sr.Namespace, want)
		if errors.Is(err, subscription.ErrPoolExhausted) {
			sr.Status.GardenerSecretName = ""
			// The pool watch brings the request back when a credential appears.
			return status.Waiting(cp.ReasonPoolExhausted, "%v; waiting for the pool to change", err).Warn()
		}
		if err != nil {
			return err
		}
		if name.claim {
			if err := r.claim(ctx, sr.Namespace, name.name, want.Tenant); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					reader = r.APIReader // someone else was faster: look again, uncached
					continue
				}
				return err
			}
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, cp.ReasonAssigned, "Assign", "assigned credential %s", name.name)
		assigned(sr, name.name)
		return nil
	}
	return fmt.Errorf("lost the race for a %s credential five times; retrying", sr.Spec.Provider)
}

func assigned(sr *cp.SubscriptionRequest, secret string) {
	sr.Status.GardenerSecretName = secret
	status.MarkReady(sr, cp.ReasonAssigned, "credential "+secret)
}

type choice struct {
	name  string
	claim bool
}

func (r *Reconciler) choose(ctx context.Context, reader client.Reader, ns string, want subscription.Request) (choice, error) {
	secrets := &corev1.SecretList{}
	if err := reader.List(ctx, secrets, client.InNamespace(ns), client.HasLabels{cp.LabelHyperscalerType}); err != nil {
		return choice{}, fmt.Errorf("listing the pool: %w", err)
	}
	pool := make([]subscription.Credential, len(secrets.Items))
	usage := map[string]int{}
	for i, s := range secrets.Items {
		pool[i] = subscription.Credential{Name: s.Name, Labels: s.Labels}
		if want.Tenant == "" {
			users := &cp.SubscriptionRequestList{}
			if err := r.Client.List(ctx, users, client.InNamespace(ns), client.MatchingFields{secretIndex: s.Name}); err != nil {
				return choice{}, fmt.Errorf("listing the users of credential %s: %w", s.Name, err)
			}
			usage[s.Name] = len(users.Items)
		}
	}
	name, claim, err := subscription.Choose(want, pool, usage)
	return choice{name, claim}, err
}

// claim labels a free credential for tenant. The Update carries the resourceVersion read,
// so of two concurrent claims exactly one succeeds; the other gets a conflict.
func (r *Reconciler) claim(ctx context.Context, ns, name, tenant string) error {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, secret); err != nil {
		return err
	}
	if secret.Labels[cp.LabelTenantName] != "" && secret.Labels[cp.LabelTenantName] != tenant {
		return apierrors.NewConflict(corev1.Resource("secrets"), name, errors.New("claimed by another tenant"))
	}
	secret.Labels[cp.LabelTenantName] = tenant
	return status.WriteFailed("update", secret, r.Client.Update(ctx, secret))
}

// stillFits: the assigned credential exists, is not dirty, and (dedicated) is the tenant's.
func (r *Reconciler) stillFits(ctx context.Context, sr *cp.SubscriptionRequest, want subscription.Request) bool {
	secret := &corev1.Secret{}
	if err := r.Pool.Get(ctx, types.NamespacedName{Namespace: sr.Namespace, Name: sr.Status.GardenerSecretName}, secret); err != nil {
		return false
	}
	l := secret.Labels
	return l[cp.LabelHyperscalerType] == want.Provider && l[cp.LabelDirty] != "true" && (want.Tenant == "" || l[cp.LabelTenantName] == want.Tenant)
}

// release marks a dedicated credential dirty once no request uses it any more.
func (r *Reconciler) release(ctx context.Context, sr *cp.SubscriptionRequest) error {
	if !controllerutil.ContainsFinalizer(sr, Finalizer) {
		return nil
	}
	if name := sr.Status.GardenerSecretName; name != "" {
		users := &cp.SubscriptionRequestList{}
		if err := r.Client.List(ctx, users, client.InNamespace(sr.Namespace), client.MatchingFields{secretIndex: name}); err != nil {
			return fmt.Errorf("listing the users of credential %s: %w", name, err)
		}
		inUse := false
		for _, u := range users.Items {
			inUse = inUse || u.UID != sr.UID
		}
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sr.Namespace, Name: name}, secret)
		if err == nil && !inUse && secret.Labels[cp.LabelShared] != "true" {
			secret.Labels[cp.LabelDirty] = "true"
			if err := r.Client.Update(ctx, secret); err != nil {
				return status.WriteFailed("update", secret, err)
			}
		} else if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading credential %s: %w", name, err)
		}
	}
	controllerutil.RemoveFinalizer(sr, Finalizer)
	return client.IgnoreNotFound(status.WriteFailed("update", sr, r.Client.Update(ctx, sr)))
}

// waitingRequests brings back, when the pool changes, the requests of that namespace
// that have no credential yet.
func (r *Reconciler) waitingRequests(ctx context.Context, o client.Object) []reconcile.Request {
	list := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, sr := range list.Items {
		if sr.Status.GardenerSecretName == "" || sr.Status.GardenerSecretName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sr.Namespace, Name: sr.Name}})
		}
	}
	return out
}
