// Package clusterroleaggregation is kube-controller-manager's clusterrole-aggregation
// controller, with the same results byte for byte, but event fan-out through an index of
// aggregation selectors instead of re-evaluating every aggregated role on every change.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/debounce"
	"github.com/trustplane/trustplane/internal/handlers"
)

// FieldOwner is upstream's field manager, so that both controllers own the same fields
// and either can take over from the other.
const FieldOwner = "clusterrole-aggregation-controller"

// Reconciler aggregates the rules of one ClusterRole.
type Reconciler struct {
	// Reader reads ClusterRoles from the informer cache.
	Reader client.Reader
	// Writer applies and updates ClusterRoles.
	Writer client.Client
	// Live reads the API server itself: after a refused apply, it tells a role that is
	// gone (deleted since the cache last saw it) from a real lack of permission.
	Live client.Reader
	// Index knows every aggregator's selectors, for event fan-out.
	Index *rbac.Index
	// Debounce holds syncs back until an aggregator's inputs are quiet.
	Debounce *debounce.Debouncer

	// written is the hash of the rules last written to each role (name → uint64), so that
	// the watch event of our own write does not sync the role again for nothing.
	written sync.Map
}

// No create, as upstream's system:controller:clusterrole-aggregation-controller: an apply
// for a role deleted after the cache's last look would otherwise bring it back.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;update;patch;escalate

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	r := &Reconciler{Reader: mgr.GetCache(), Writer: mgr.GetClient(), Live: mgr.GetAPIReader(), Index: rbac.NewIndex(),
		Debounce: debounce.New(opts.QuietPeriod, opts.MaxDelay, c)}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WatchesRawSource(source.Kind(mgr.GetCache(), &rbacv1.ClusterRole{}, handlers.OldNew(r.changed))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.Workers,
			// Upstream's queue: per-item exponential backoff with an overall token bucket.
			RateLimiter: workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		}).
		Complete(r)
	return r, err
}

// Reconcile is upstream's syncClusterRole, once the role's inputs are quiet and the
// aggregators it selects have synced (edit before admin): a result written from an
// aggregator about to change would be written again.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wait, done := r.Debounce.WaitInOrder(req.Name, func() []string { return r.Index.Inputs(req.NamespacedName) })
	if wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	defer done()
	role := &rbacv1.ClusterRole{}
	if err := r.Reader.Get(ctx, req.NamespacedName, role); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if role.AggregationRule == nil {
		return reconcile.Result{}, nil
	}
	selectors, err := parseSelectors(role.AggregationRule.ClusterRoleSelectors)
	if err != nil {
		return reconcile.Result{}, err // rate-limited retry, as upstream
	}
	all := &rbacv1.ClusterRoleList{}
	// Read-only use: skip the cache's deep copy of every ClusterRole on every sync.
	if err := r.Reader.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	rules := rbac.Aggregate(role.Name, selectors, sources(all.Items))
	if rbac.RulesEqual(rules, role.Rules) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.write(ctx, role, rules)
}

// write server-side applies only the rules, with upstream's field manager and Force; a
// server without apply support (415) gets an Update of the role with the new rules. A
// role deleted since the cache saw it ends the sync: the apply would be a create, which
// the controller may not do (Forbidden), and the Update finds nothing (NotFound).
func (r *Reconciler) write(ctx context.Context, role *rbacv1.ClusterRole, rules []rbacv1.PolicyRule) error {
	apply := rbacv1ac.ClusterRole(role.Name).WithRules(rbac.ApplyRules(rules)...)
	err := r.Writer.Apply(ctx, apply, client.FieldOwner(FieldOwner), client.ForceOwnership)
	if apierrors.IsUnsupportedMediaType(err) {
		updated := role.DeepCopy()
		updated.Rules = rules
		err = r.Writer.Update(ctx, updated)
	}
	if err == nil {
		r.written.Store(role.Name, rbac.RulesHash(rules))
		return nil
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return rbac.IgnoreIfGone(fmt.Errorf("applying the rules of ClusterRole %s: %w", role.Name, err),
			r.Live.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{}))
	}
	return fmt.Errorf("writing the rules of ClusterRole %s: %w", role.Name, err)
}

func parseSelectors(in []metav1.LabelSelector) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for i := range in {
		s, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func sources(roles []rbacv1.ClusterRole) []rbac.Source {
	out := make([]rbac.Source, len(roles))
	for i := range roles {
		out[i] = rbac.Source{Name: roles[i].Name, Labels: roles[i].Labels, Rules: roles[i].Rules}
	}
	return out
}

// changed enqueues, for a ClusterRole event, the role itself if it aggregates (before or
// after) and every aggregator whose selectors match its labels before or after — the
// only roles whose result can change. Upstream enqueues every aggregator instead.
func (r *Reconciler) changed(old, cur *rbacv1.ClusterRole, q handlers.Queue) {
	if old != nil && cur != nil && sameForAggregation(old, cur) {
		return // e.g. an annotation or a status-only change: no result can differ
	}
	var key types.NamespacedName
	var oldLabels, curLabels map[string]string
	if old != nil {
		key, oldLabels = types.NamespacedName{Name: old.Name}, old.Labels
	}
	if cur != nil {
		key, curLabels = types.NamespacedName{Name: cur.Name}, cur.Labels
	}
	switch {
	case cur != nil && cur.AggregationRule != nil:
		// A selector that does not parse is left out; the role's own sync reports it.
		selectors := make([]labels.Selector, 0, len(cur.AggregationRule.ClusterRoleSelectors))
		for i := range cur.AggregationRule.ClusterRoleSelectors {
			if s, err := metav1.LabelSelectorAsSelector(&cur.AggregationRule.ClusterRoleSelectors[i]); err == nil {
				selectors = append(selectors, s)
			}
		}
		r.Index.Set(key, selectors, cur.Labels)
		if !r.ownWrite(old, cur) {
			r.enqueue(q, key)
		}
	default:
		r.written.Delete(key.Name)
		r.Index.Delete(key)
	}
	for _, agg := range r.Index.Affected("", oldLabels, curLabels) {
		r.enqueue(q, agg)
	}
}

// ownWrite: the only change is the rules we last wrote, i.e. the event of our own write.
// The role's result cannot have changed (its inputs' own events enqueue it when they
// change), but the aggregators that select it must still see its new rules.
func (r *Reconciler) ownWrite(old, cur *rbacv1.ClusterRole) bool {
	if old == nil || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.AggregationRule, cur.AggregationRule) {
		return false
	}
	written, ok := r.written.Load(cur.Name)
	return ok && written.(uint64) == rbac.RulesHash(cur.Rules)
}

func (r *Reconciler) enqueue(q handlers.Queue, key types.NamespacedName) {
	q.AddAfter(reconcile.Request{NamespacedName: key}, r.Debounce.Touch(key.Name))
}

// sameForAggregation: nothing that aggregation reads changed.
func sameForAggregation(a, b *rbacv1.ClusterRole) bool {
	return equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.AggregationRule, b.AggregationRule) &&
		rbac.RulesEqual(a.Rules, b.Rules)
}
