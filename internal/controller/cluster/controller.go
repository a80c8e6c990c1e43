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
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/access"
	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/shoot"
)

const (
	// Name is the controller's name in --controllers.
	Name = "cluster"
	// FieldOwner applies everything this controller writes.
	FieldOwner = "trustplane-cluster"
	// Finalizer holds a Cluster until its Shoot is gone and its credential released.
	Finalizer = "cluster.trustplane.io/deprovision"

	ConditionProvisioned = "ClusterProvisioned"
	ConditionReady       = "Ready"
	ConditionStalled     = "Stalled"

	ReasonProvisioned            = "Provisioned"
	ReasonProvisioning           = "Provisioning"
	ReasonProvisioningError      = "ProvisioningError"
	ReasonProvisioningFailed     = "ProvisioningFailed"
	ReasonWaitingForSubscription = "WaitingForSubscription"
	ReasonBroughtAlong           = "BroughtAlong"
	ReasonKubeconfigMissing      = "KubeconfigMissing"
	ReasonKubeconfigInvalid      = "KubeconfigInvalid"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonGardenNotConfigured    = "GardenNotConfigured"
	ReasonGardenUnreachable      = "GardenUnreachable"
	ReasonShootNameTaken         = "ShootNameTaken"
	ReasonAdministratorsBound    = "AdministratorsBound"
	ReasonClusterUnreachable     = "ClusterUnreachable"
	ReasonNotProvisioned         = "NotProvisioned"
	ReasonInUse                  = "InUse"
	ReasonDeprovisioning         = "Deprovisioning"

	secretRefIndex = ".spec.kubeconfigSecretRef.name"
	// RequestsByCluster indexes KubeconfigRequests by spec.cluster (IndexRequestsByCluster).
	RequestsByCluster = ".spec.cluster"
)

// Controller is the registry entry for `trustplane manager`; the garden options are
// shared with the kubeconfig controller.
func Controller(gardenOpts *garden.Options) manager.Controller {
	return manager.Controller{
		Name: Name, Help: "Cluster: Gardener Shoots from a credential pool, or brought-along clusters; cluster-admin for administrators",
		AddFlags: gardenOpts.AddFlags,
		Setup: gardenOpts.Setup(func(mgr ctrl.Manager, g *garden.Garden) error {
			_, err := Setup(mgr, g)
			return err
		}),
	}
}

// Reconciler reconciles Clusters.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // kubeconfig Secrets are read uncached: they hold cluster-admin credentials
	Recorder  events.EventRecorder
	// Garden is nil when no garden is configured.
	Garden *garden.Garden
}

// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.kyma-project.io,resources=kubeconfigrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=control-plane.kyma-project.io,resources=subscriptionrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the controller to mgr; g may be nil (brought-along clusters only).
func Setup(mgr ctrl.Manager, g *garden.Garden) (*Reconciler, error) {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &operatorv1alpha1.Cluster{}, secretRefIndex, func(o client.Object) []string {
		if ref := o.(*operatorv1alpha1.Cluster).Spec.KubeconfigSecretRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := IndexRequestsByCluster(mgr); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), Garden: g}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&operatorv1alpha1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&cp.SubscriptionRequest{}).
		// Secrets as metadata only: the operator never caches credentials.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingSecret), builder.OnlyMetadata).
		// A deleting Cluster waits for its KubeconfigRequests to go.
		Watches(&operatorv1alpha1.KubeconfigRequest{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*operatorv1alpha1.KubeconfigRequest).Spec.Cluster}}}
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}))
	if g != nil {
		b = b.WatchesRawSource(source.Kind(g.Cache, garden.NewShoot(), handler.TypedEnqueueRequestsFromMapFunc(clusterOfShoot)))
	}
	return r, b.Complete(r)
}

var requestsIndexed sync.Map // ctrl.Manager → struct{}

// IndexRequestsByCluster registers the RequestsByCluster index once per manager: the
// cluster and kubeconfig controllers both use it, and either may run without the other.
func IndexRequestsByCluster(mgr ctrl.Manager) error {
	if _, done := requestsIndexed.LoadOrStore(mgr, struct{}{}); done {
		return nil
	}
	return mgr.GetFieldIndexer().IndexField(context.Background(), &operatorv1alpha1.KubeconfigRequest{}, RequestsByCluster, func(o client.Object) []string {
		return []string{o.(*operatorv1alpha1.KubeconfigRequest).Spec.Cluster}
	})
}

// Reconcile provisions (or adopts, or deprovisions) one Cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := c.Status.DeepCopy()
	var err error
	if !c.DeletionTimestamp.IsZero() {
		err = r.deprovision(ctx, c)
	} else {
		if controllerutil.AddFinalizer(c, Finalizer) {
			if err := r.Client.Update(ctx, c); err != nil {
				return reconcile.Result{}, err
			}
		}
		err = r.reconcile(ctx, c)
	}
	c.Status.ObservedGeneration = c.Generation
	if !statusEqual(before, &c.Status) && controllerutil.ContainsFinalizer(c, Finalizer) {
		if perr := r.Client.Status().Update(ctx, c); perr != nil && !apierrors.IsNotFound(perr) {
			return reconcile.Result{}, errors.Join(err, perr)
		}
	}
	var stalled *stalledError
	if errors.As(err, &stalled) {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	// Every wait ends with a watched change (Shoot, SubscriptionRequest, Secret,
	// KubeconfigRequest): no requeue after a time.
	return reconcile.Result{}, err
}

// stalledError is a problem only a change of the Cluster (or its Secret) can fix.
type stalledError struct{ reason, msg string }

func (e *stalledError) Error() string { return e.msg }

// stall records a permanent problem: ClusterProvisioned and Ready false, Stalled true.
func (r *Reconciler) stall(c *operatorv1alpha1.Cluster, reason, msg string) error {
	r.set(c, ConditionProvisioned, metav1.ConditionFalse, reason, msg)
	r.set(c, ConditionReady, metav1.ConditionFalse, reason, msg)
	r.set(c, ConditionStalled, metav1.ConditionTrue, reason, msg)
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	return &stalledError{reason, msg}
}

// waiting records a state that a watched change will end.
func (r *Reconciler) waiting(c *operatorv1alpha1.Cluster, provisioned metav1.ConditionStatus, reason, msg string) {
	r.set(c, ConditionProvisioned, provisioned, reason, msg)
	r.set(c, ConditionReady, metav1.ConditionFalse, reason, msg)
	meta.RemoveStatusCondition(&c.Status.Conditions, ConditionStalled)
}

func (r *Reconciler) reconcile(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	// Cluster-admin access to the cluster: its own kubeconfig, or Gardener's once provisioned.
	adminAccess := r.provision
	if c.Spec.KubeconfigSecretRef != nil {
		adminAccess = r.broughtAlong
	}
	admin, err := adminAccess(ctx, c)
	if admin == nil {
		return err // not there yet, nothing to do, or a problem the conditions describe
	}
	if err := bindAdministrators(ctx, admin, access.AdministratorsOf(c.Namespace, c.Name), c.Spec.Administrators); err != nil {
		msg := fmt.Sprintf("binding administrators in the cluster: %v", err)
		r.set(c, ConditionReady, metav1.ConditionFalse, ReasonClusterUnreachable, msg)
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonClusterUnreachable, "BindAdministrators", "%s", msg)
		return err
	}
	r.set(c, ConditionReady, metav1.ConditionTrue, ReasonAdministratorsBound, fmt.Sprintf("administrators bound to cluster-admin: %d", len(c.Spec.Administrators)))
	meta.RemoveStatusCondition(&c.Status.Conditions, ConditionStalled)
	return nil
}

// broughtAlong checks the Cluster's own kubeconfig; a nil config means "not yet".
func (r *Reconciler) broughtAlong(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	cfg, err := BroughtAlongConfig(ctx, r.APIReader, c)
	var missing *missingSecretError
	switch {
	case errors.As(err, &missing):
		// The Secret watch brings the Cluster back when it appears.
		r.waiting(c, metav1.ConditionFalse, ReasonKubeconfigMissing, err.Error())
		return nil, nil
	case errors.Is(err, errInvalidKubeconfig):
		return nil, r.stall(c, ReasonKubeconfigInvalid, err.Error())
	case err != nil:
		return nil, err
	}
	r.set(c, ConditionProvisioned, metav1.ConditionTrue, ReasonBroughtAlong, "brought-along cluster at "+cfg.Host)
	return cfg, nil
}

var errInvalidKubeconfig = errors.New("invalid kubeconfig")

type missingSecretError struct{ msg string }

func (e *missingSecretError) Error() string { return e.msg }

// BroughtAlongConfig reads the cluster-admin kubeconfig a brought-along Cluster points at.
func BroughtAlongConfig(ctx context.Context, reader client.Reader, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
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
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w in Secret %s key %q: %v", errInvalidKubeconfig, ref.Name, key, err)
	}
	return cfg, nil
}

// provision drives the Gardener path; a nil config means there is nothing more to do now:
// not provisioned yet, or provisioned with the administrators already bound.
func (r *Reconciler) provision(ctx context.Context, c *operatorv1alpha1.Cluster) (*rest.Config, error) {
	if r.Garden == nil {
		return nil, r.stall(c, ReasonGardenNotConfigured, "the Cluster has no kubeconfigSecretRef and the operator runs without --garden-kubeconfig")
	}
	if err := shoot.Validate(c.Spec); err != nil {
		return nil, r.stall(c, ReasonInvalidSpec, err.Error())
	}
	sr, err := r.applySubscription(ctx, c)
	if err != nil {
		return nil, err
	}
	ready := meta.FindStatusCondition(sr.Status.Conditions, "Ready")
	if sr.Status.GardenerSecretName == "" || ready == nil || ready.Status != metav1.ConditionTrue {
		msg := "waiting for SubscriptionRequest " + sr.Name
		if ready != nil {
			msg += ": " + ready.Message
		}
		r.waiting(c, metav1.ConditionFalse, ReasonWaitingForSubscription, msg)
		return nil, nil // the SubscriptionRequest's status change brings the Cluster back
	}
	desired, err := shoot.Desired(c, r.Garden.Params, sr.Status.GardenerSecretName)
	if err != nil {
		return nil, r.stall(c, ReasonInvalidSpec, err.Error())
	}
	if err := r.checkShootOwner(ctx, c, desired.GetName()); err != nil {
		return nil, err
	}
	if err := r.Garden.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, r.gardenUnreachable(c, "applying shoot "+desired.GetName(), err)
	}
	c.Status.ShootName = desired.GetName()
	progress := shoot.ProgressOf(desired)
	if !progress.Provisioned() {
		switch progress.Phase {
		case shoot.PhaseFailed:
			r.waiting(c, metav1.ConditionFalse, ReasonProvisioningFailed, progress.Message())
			r.set(c, ConditionStalled, metav1.ConditionTrue, ReasonProvisioningFailed, progress.Message())
		case shoot.PhaseError:
			r.waiting(c, metav1.ConditionFalse, ReasonProvisioningError, progress.Message())
		default:
			r.waiting(c, metav1.ConditionFalse, ReasonProvisioning, progress.Message())
		}
		return nil, nil // the Shoot watch brings the Cluster back at every step
	}
	wasProvisioned := meta.IsStatusConditionTrue(c.Status.Conditions, ConditionProvisioned)
	if !wasProvisioned {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonProvisioned, "Provision", "shoot %s is provisioned", desired.GetName())
	}
	r.set(c, ConditionProvisioned, metav1.ConditionTrue, ReasonProvisioned, "shoot "+desired.GetName()+": "+progress.Message())
	// Gardener reports every step of its periodic reconciles on the Shoot; none of them
	// needs a new admin kubeconfig once this generation's administrators are bound.
	if ready := meta.FindStatusCondition(c.Status.Conditions, ConditionReady); wasProvisioned && ready != nil &&
		ready.Reason == ReasonAdministratorsBound && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation {
		return nil, nil
	}
	admin, _, err := r.Garden.AdminConfig(ctx, desired.GetName())
	if err != nil {
		return nil, r.gardenUnreachable(c, "admin kubeconfig", err)
	}
	return admin, nil
}

func (r *Reconciler) gardenUnreachable(c *operatorv1alpha1.Cluster, what string, err error) error {
	msg := fmt.Sprintf("garden: %s: %v", what, err)
	r.set(c, ConditionReady, metav1.ConditionFalse, ReasonGardenUnreachable, msg)
	if cond := meta.FindStatusCondition(c.Status.Conditions, ConditionProvisioned); cond == nil || cond.Status != metav1.ConditionTrue {
		r.set(c, ConditionProvisioned, metav1.ConditionFalse, ReasonGardenUnreachable, msg)
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonGardenUnreachable, "Reconcile", "%s", msg)
	return fmt.Errorf("%s: %w", what, err)
}

// checkShootOwner refuses to take over a Shoot of the same name made for something else.
func (r *Reconciler) checkShootOwner(ctx context.Context, c *operatorv1alpha1.Cluster, name string) error {
	live := garden.NewShoot()
	err := r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: name}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return r.gardenUnreachable(c, "reading shoot "+name, err)
	}
	if l := live.GetLabels(); l[shoot.ClusterNamespaceLabel] != c.Namespace || l[shoot.ClusterNameLabel] != c.Name {
		return r.stall(c, ReasonShootNameTaken, fmt.Sprintf("shoot %s/%s exists and does not belong to this Cluster; not taking it over", r.Garden.Params.Namespace, name))
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
		Spec: cp.SubscriptionRequestSpec{Provider: c.Spec.Infrastructure.Provider, SubscriptionSelector: selector},
	}
	//nolint:staticcheck // typed apply: every field set here is intended
	if err := r.Client.Patch(ctx, sr, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying SubscriptionRequest %s: %w", c.Name, err)
	}
	return sr, nil
}

// bindAdministrators makes the cluster's cluster-admin bindings match the administrators:
// it applies one per administrator and deletes only bindings it made for former ones.
func bindAdministrators(ctx context.Context, cfg *rest.Config, owner string, administrators []string) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 15 * time.Second
	target, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	want := access.AdminBindings(owner, administrators)
	names := make([]string, len(want))
	for i := range want {
		names[i] = want[i].Name
		//nolint:staticcheck // typed apply, see applySubscription
		if err := target.Patch(ctx, &want[i], client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying ClusterRoleBinding %s: %w", want[i].Name, err)
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
				return fmt.Errorf("removing administrator binding %s: %w", have.Items[i].Name, err)
			}
		}
	}
	return nil
}

// deprovision runs the deletion: KubeconfigRequests first (they clean up inside the
// cluster), then the administrators' bindings or the Shoot, then the credential.
func (r *Reconciler) deprovision(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	if !controllerutil.ContainsFinalizer(c, Finalizer) {
		return nil
	}
	requests := &operatorv1alpha1.KubeconfigRequestList{}
	if err := r.Client.List(ctx, requests, client.InNamespace(c.Namespace), client.MatchingFields{RequestsByCluster: c.Name}); err != nil {
		return err
	}
	if n := len(requests.Items); n > 0 {
		names := make([]string, 0, n)
		for _, kr := range requests.Items {
			names = append(names, kr.Name)
		}
		slices.Sort(names)
		msg := fmt.Sprintf("deletion waits for %d KubeconfigRequests of this cluster to be deleted: %s", n, strings.Join(names, ", "))
		r.set(c, ConditionReady, metav1.ConditionFalse, ReasonInUse, msg)
		return nil // the KubeconfigRequest watch brings the Cluster back
	}
	if c.Spec.KubeconfigSecretRef != nil {
		if err := r.unbindBroughtAlong(ctx, c); err != nil {
			return err
		}
	} else if gone, err := r.deleteShoot(ctx, c); err != nil || !gone {
		return err
	}
	sr := &cp.SubscriptionRequest{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, sr)
	if err == nil && metav1.IsControlledBy(sr, c) {
		if sr.DeletionTimestamp.IsZero() {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, sr)); err != nil {
				return fmt.Errorf("releasing SubscriptionRequest %s: %w", sr.Name, err)
			}
		}
		r.set(c, ConditionReady, metav1.ConditionFalse, ReasonDeprovisioning, "releasing the hyperscaler credential")
		return nil // the SubscriptionRequest watch brings the Cluster back once it is gone
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonDeprovisioning, "Delete", "deprovisioned")
	controllerutil.RemoveFinalizer(c, Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, c))
}

// unbindBroughtAlong removes the administrators' bindings from a brought-along cluster,
// which outlives its Cluster. A kubeconfig that is gone or broken cannot be used; that is
// reported and the deletion goes on.
func (r *Reconciler) unbindBroughtAlong(ctx context.Context, c *operatorv1alpha1.Cluster) error {
	cfg, err := BroughtAlongConfig(ctx, r.APIReader, c)
	var missing *missingSecretError
	if errors.As(err, &missing) || errors.Is(err, errInvalidKubeconfig) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonKubeconfigMissing, "Delete", "administrator bindings left in the cluster: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	if err := bindAdministrators(ctx, cfg, access.AdministratorsOf(c.Namespace, c.Name), nil); err != nil {
		r.set(c, ConditionReady, metav1.ConditionFalse, ReasonClusterUnreachable, "removing administrator bindings: "+err.Error())
		return err
	}
	return nil
}

// deleteShoot confirms and deletes the Cluster's Shoot and reports whether it is gone.
// A Shoot of that name that belongs to something else is never touched.
func (r *Reconciler) deleteShoot(ctx context.Context, c *operatorv1alpha1.Cluster) (bool, error) {
	name := shoot.Name(c.Namespace, c.Name)
	if r.Garden == nil {
		if c.Status.ShootName == "" {
			return true, nil // never provisioned
		}
		msg := fmt.Sprintf("shoot %s cannot be deleted: the operator runs without --garden-kubeconfig", c.Status.ShootName)
		r.set(c, ConditionReady, metav1.ConditionFalse, ReasonGardenNotConfigured, msg)
		r.set(c, ConditionStalled, metav1.ConditionTrue, ReasonGardenNotConfigured, msg)
		return false, nil
	}
	live := garden.NewShoot()
	err := r.Garden.Client.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: name}, live)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, r.gardenUnreachable(c, "reading shoot "+name, err)
	}
	if l := live.GetLabels(); l[shoot.ClusterNamespaceLabel] != c.Namespace || l[shoot.ClusterNameLabel] != c.Name {
		return true, nil
	}
	if live.GetDeletionTimestamp() == nil {
		// Gardener refuses to delete a Shoot that does not carry the confirmation.
		confirm := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+shoot.ConfirmDeletionAnnotation+`":"true"}}}`))
		if err := r.Garden.Client.Patch(ctx, live, confirm); err != nil {
			return false, r.gardenUnreachable(c, "confirming deletion of shoot "+name, err)
		}
		if err := client.IgnoreNotFound(r.Garden.Client.Delete(ctx, live)); err != nil {
			return false, r.gardenUnreachable(c, "deleting shoot "+name, err)
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonDeprovisioning, "Delete", "deleting shoot %s", name)
	}
	msg := "deleting shoot " + name
	if p := shoot.ProgressOf(live); p.Phase == shoot.PhaseDeleting {
		msg += ": " + p.Message()
	}
	r.set(c, ConditionProvisioned, metav1.ConditionFalse, ReasonDeprovisioning, msg)
	r.set(c, ConditionReady, metav1.ConditionFalse, ReasonDeprovisioning, msg)
	return false, nil // the Shoot watch brings the Cluster back when it is gone
}

func (r *Reconciler) set(c *operatorv1alpha1.Cluster, condition string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: condition, Status: status, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

func statusEqual(a, b *operatorv1alpha1.ClusterStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.ShootName != b.ShootName || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, ca := range a.Conditions {
		cb := meta.FindStatusCondition(b.Conditions, ca.Type)
		if cb == nil || cb.Status != ca.Status || cb.Reason != ca.Reason || cb.Message != ca.Message || cb.ObservedGeneration != ca.ObservedGeneration {
			return false
		}
	}
	return true
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
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretRefIndex: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, c := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}
	}
	return out
}
