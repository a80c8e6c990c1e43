// Package roleaggregation brings ClusterRole-style aggregation to namespaced Roles, which
// Kubernetes does not have: a Role annotated with a label selector gets the rules of the
// matching Roles in its own namespace, with the same ordering and dedup rules.
package roleaggregation

import (
	"context"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/manager"
)

const (
	// FieldOwner owns the rules this controller writes.
	FieldOwner = "trustplane-role-aggregation"
	// SelectorAnnotation holds the label selector (api/aggregation).
	SelectorAnnotation = aggregation.SelectorAnnotation
)

// Reconciler aggregates the rules of one annotated Role.
type Reconciler struct {
	Reader client.Reader
	Writer client.Client
	// Live reads the API server itself: after a refused apply, it tells a Role that is
	// gone (deleted since the cache last saw it) from a real lack of permission.
	Live     client.Reader
	Recorder events.EventRecorder
	Index    *rbac.Index
	// Policy reads the ValidatingAdmissionPolicy and binding that refuse the annotation to
	// whoever may not escalate Roles (a cache of those two names). Without it, and without
	// TrustRoleAuthors, no annotation is trusted.
	Policy client.Reader
	// TrustRoleAuthors trusts every annotation (--role-aggregation-trust-role-authors).
	TrustRoleAuthors bool

	// warned holds the Roles told (event and log line) that their annotation is ignored,
	// so that they are told once, not on every sync; a trusted sync or a deletion forgets.
	warned sync.Map
}

// No create: an apply for a Role deleted after the cache's last look would otherwise
// bring it back (as for ClusterRoles, where upstream's controller has no create either).
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;list;watch;update;patch;escalate
// Only the policy and binding it looks for: the cache lists and watches them by name.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies,verbs=get;list;watch,resourceNames=trustplane-role-aggregation
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicybindings,verbs=get;list;watch,resourceNames=trustplane-role-aggregation

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{Reader: mgr.GetCache(), Writer: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name),
		Index: rbac.NewIndex(), TrustRoleAuthors: opts.TrustRoleAuthors}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WatchesRawSource(source.Kind(mgr.GetCache(), &rbacv1.Role{}, handlers.OldNew(r.changed))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers})
	if !opts.TrustRoleAuthors {
		// A cache of the two objects by name: the RBAC grants no more (resourceNames), and
		// installing, loosening or removing the policy re-syncs every annotated Role.
		byName := func(name string) cache.ByObject {
			return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
		}
		policies, err := cache.New(mgr.GetConfig(), cache.Options{
			HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			ByObject: map[client.Object]cache.ByObject{
				&admissionregistrationv1.ValidatingAdmissionPolicy{}:        byName(PolicyName),
				&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}: byName(PolicyBindingName),
			},
		})
		if err != nil {
			return nil, fmt.Errorf("creating the admission policy cache: %w", err)
		}
		if err := manager.AddCache(mgr, policies); err != nil {
			return nil, fmt.Errorf("adding the admission policy cache: %w", err)
		}
		r.Policy = policies
		all := handler.EnqueueRequestsFromMapFunc(r.annotatedRoles)
		b = b.WatchesRawSource(source.Kind(policies, client.Object(&admissionregistrationv1.ValidatingAdmissionPolicy{}), all)).
			WatchesRawSource(source.Kind(policies, client.Object(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}), all))
	}
	return r, b.Complete(r)
}

// Trusted says whether annotations may be acted on: the operator said so, or the admission
// policy makes sure that only who may escalate Roles in the namespace sets or changes one
// (as the API server allows an aggregationRule only to who may escalate). Otherwise anyone
// allowed to edit a Role could have the manager, which holds escalate, copy into it rules
// they do not hold. If not, it says why.
func (r *Reconciler) Trusted(ctx context.Context) (bool, string, error) {
	if r.TrustRoleAuthors {
		return true, "", nil
	}
	if r.Policy == nil {
		return false, "no admission policy reader is configured", nil
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := r.Policy.Get(ctx, client.ObjectKey{Name: PolicyName}, policy); apierrors.IsNotFound(err) {
		policy = nil
	} else if err != nil {
		return false, "", fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", PolicyName, err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := r.Policy.Get(ctx, client.ObjectKey{Name: PolicyBindingName}, binding); apierrors.IsNotFound(err) {
		binding = nil
	} else if err != nil {
		return false, "", fmt.Errorf("reading ValidatingAdmissionPolicyBinding %s: %w", PolicyBindingName, err)
	}
	ok, why := PolicyEnforced(policy, binding)
	return ok, why, nil
}

// annotatedRoles is every Role with the annotation: all of them await a policy change.
func (r *Reconciler) annotatedRoles(ctx context.Context, _ client.Object) []reconcile.Request {
	roles := &rbacv1.RoleList{}
	if err := r.Reader.List(ctx, roles, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing Roles after an admission policy change; annotated Roles sync on their next change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range roles.Items {
		if _, ok := roles.Items[i].Annotations[SelectorAnnotation]; ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&roles.Items[i])})
		}
	}
	return reqs
}

// Reconcile aggregates like the ClusterRole controller, scoped to the Role's namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &rbacv1.Role{}
	if err := r.Reader.Get(ctx, req.NamespacedName, role); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	raw, ok := role.Annotations[SelectorAnnotation]
	if !ok {
		return reconcile.Result{}, nil
	}
	trusted, why, err := r.Trusted(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !trusted {
		// Left untouched; a change of the policy (watched) or of the Role brings it back.
		if _, told := r.warned.LoadOrStore(req.NamespacedName, struct{}{}); !told {
			r.Recorder.Eventf(role, nil, corev1.EventTypeWarning, aggregation.ReasonUntrustedAnnotation, "Aggregate",
				"annotation %s ignored, rules left unchanged: %s, so its author may not be allowed to escalate; install it (config/policy) or run the manager with --role-aggregation-trust-role-authors", SelectorAnnotation, why)
			log.FromContext(ctx).Info("ignoring the aggregation annotation: nothing makes sure its author may escalate Roles",
				"annotation", SelectorAnnotation, "why", why)
		}
		return reconcile.Result{}, nil
	}
	r.warned.Delete(req.NamespacedName)
	selector, err := labels.Parse(raw)
	if err != nil {
		// The Role is left untouched; the annotation's next change brings it back.
		r.Recorder.Eventf(role, nil, corev1.EventTypeWarning, aggregation.ReasonInvalidSelector, "Aggregate",
			"annotation %s is not a valid label selector, rules left unchanged: %v", SelectorAnnotation, err)
		return reconcile.Result{}, nil
	}
	all := &rbacv1.RoleList{}
	if err := r.Reader.List(ctx, all, client.InNamespace(role.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	candidates := make([]rbac.Source, len(all.Items))
	for i := range all.Items {
		candidates[i] = rbac.Source{Name: all.Items[i].Name, Labels: all.Items[i].Labels, Rules: all.Items[i].Rules}
	}
	rules := rbac.Aggregate(role.Name, []labels.Selector{selector}, candidates)
	if rbac.RulesEqual(rules, role.Rules) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.write(ctx, role, rules)
}

// write server-side applies only the rules, with Force. A Role deleted since the cache saw
// it ends the sync: the apply would be a create, which the controller may not do.
func (r *Reconciler) write(ctx context.Context, role *rbacv1.Role, rules []rbacv1.PolicyRule) error {
	apply := rbacv1ac.Role(role.Name, role.Namespace).WithRules(rbac.ApplyRules(rules)...)
	err := r.Writer.Apply(ctx, apply, client.FieldOwner(FieldOwner), client.ForceOwnership)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("applying the rules of Role %s/%s: %w", role.Namespace, role.Name, err)
	if apierrors.IsForbidden(err) {
		return rbac.IgnoreIfGone(err, r.Live.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.Role{}))
	}
	return err
}

// changed enqueues the Role itself if it aggregates and the aggregators of its namespace
// whose selector matches its labels before or after the change.
func (r *Reconciler) changed(old, cur *rbacv1.Role, q handlers.Queue) {
	if old != nil && cur != nil && equality.Semantic.DeepEqual(old.Labels, cur.Labels) &&
		old.Annotations[SelectorAnnotation] == cur.Annotations[SelectorAnnotation] && rbac.RulesEqual(old.Rules, cur.Rules) {
		return
	}
	var key types.NamespacedName
	var oldLabels, curLabels map[string]string
	if old != nil {
		key, oldLabels = types.NamespacedName{Namespace: old.Namespace, Name: old.Name}, old.Labels
	}
	if cur != nil {
		key, curLabels = types.NamespacedName{Namespace: cur.Namespace, Name: cur.Name}, cur.Labels
	}
	raw, aggregates := "", false
	if cur != nil {
		raw, aggregates = cur.Annotations[SelectorAnnotation]
	}
	if aggregates {
		var selectors []labels.Selector
		if s, err := labels.Parse(raw); err == nil {
			selectors = append(selectors, s)
		}
		r.Index.Set(key, selectors, cur.Labels)
		q.Add(reconcile.Request{NamespacedName: key})
	} else {
		r.Index.Delete(key)
		r.warned.Delete(key) // a Role that aggregates again is told again
	}
	for _, agg := range r.Index.Affected(key.Namespace, oldLabels, curLabels) {
		q.Add(reconcile.Request{NamespacedName: agg})
	}
}
