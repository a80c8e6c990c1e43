package sidebyside

import (
	"fmt"
	"maps"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
)

// Replay is ClusterRoles in memory that ops are applied to one at a time, each followed by
// bringing every aggregator up to date: what a controller that handled every event alone
// would make of the churn.
//
// Its count of rule changes depends on the events alone, not on timing, so it bounds a
// controller that writes only when the rules change: coalescing events (a busy controller
// sees several at once) can only lower its count, and anything above it is a write of a
// state the events never asked for (an aggregator recomputed from a level below that had
// not caught up yet). kube-controller-manager's own write count is no such bound: how
// much it coalesces depends on how far behind it runs.
type Replay struct {
	roles     map[string]*rbacv1.ClusterRole
	selectors map[string][]labels.Selector
}

// NewReplay starts from a converged list of ClusterRoles.
func NewReplay(start []rbacv1.ClusterRole) *Replay {
	w := &Replay{roles: map[string]*rbacv1.ClusterRole{}, selectors: map[string][]labels.Selector{}}
	for i := range start {
		w.put(start[i].DeepCopy())
	}
	return w
}

// Apply performs op as the API server would, brings every aggregator up to date and
// returns how many of them now have rules other than before.
func (w *Replay) Apply(op Op) (changed int, err error) {
	touched, err := w.apply(op)
	if err != nil {
		return 0, fmt.Errorf("replaying %s: %w", op.Name, err)
	}
	return w.settle(touched), nil
}

// Rules returns every ClusterRole's rules.
func (w *Replay) Rules() map[string][]rbacv1.PolicyRule {
	out := make(map[string][]rbacv1.PolicyRule, len(w.roles))
	for name, r := range w.roles {
		out[name] = r.Rules
	}
	return out
}

func (w *Replay) put(r *rbacv1.ClusterRole) {
	w.roles[r.Name] = r
	delete(w.selectors, r.Name)
	if r.AggregationRule == nil {
		return
	}
	var sel []labels.Selector
	for i := range r.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			continue // as the controllers do: the selectors that parse
		}
		sel = append(sel, s)
	}
	w.selectors[r.Name] = sel
}

// apply performs op as the API server would and returns the aggregators it may have
// changed the result of: those selecting the role's old or new labels, and the role
// itself when its selectors changed.
func (w *Replay) apply(op Op) ([]string, error) {
	old := w.roles[op.Name]
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	switch {
	case op.Create != nil:
		w.put(op.Create.DeepCopy())
	case op.Delete:
		delete(w.roles, op.Name)
		delete(w.selectors, op.Name)
	case old == nil:
		return nil, nil // a patch of a role already gone: the API server's NotFound
	default:
		r := old.DeepCopy()
		if err := mergePatch(r, op.Patch); err != nil {
			return nil, err
		}
		w.put(r)
	}
	var newLabels map[string]string
	if r := w.roles[op.Name]; r != nil {
		newLabels = r.Labels
	}
	touched := w.selecting(op.Name, oldLabels, newLabels)
	if _, ok := w.selectors[op.Name]; ok {
		touched = append(touched, op.Name)
	}
	return touched, nil
}

// mergePatch applies the corpus's merge patches: labels (null removes one), rules and
// aggregationRule.clusterRoleSelectors.
func mergePatch(r *rbacv1.ClusterRole, patch map[string]any) error {
	for key, v := range patch {
		switch key {
		case "metadata":
			for k, l := range v.(map[string]any)["labels"].(map[string]any) {
				if r.Labels == nil {
					r.Labels = map[string]string{}
				}
				if l == nil {
					delete(r.Labels, k)
				} else {
					r.Labels[k] = l.(string)
				}
			}
		case "rules":
			r.Rules = v.([]rbacv1.PolicyRule)
		case "aggregationRule":
			r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: v.(map[string]any)["clusterRoleSelectors"].([]metav1.LabelSelector)}
		default:
			return fmt.Errorf("merge patch of %q: not a field the corpus patches", key)
		}
	}
	return nil
}

// selecting lists the aggregators other than self with a selector matching any of the
// label sets.
func (w *Replay) selecting(self string, labelSets ...map[string]string) []string {
	var out []string
	for name, sel := range w.selectors {
		if name == self {
			continue
		}
	match:
		for _, s := range sel {
			for _, l := range labelSets {
				if l != nil && s.Matches(labels.Set(l)) {
					out = append(out, name)
					break match
				}
			}
		}
	}
	return out
}

// settle recomputes aggregators, starting from touched and following each changed one
// to the aggregators selecting it, until nothing changes (selection in the corpus is
// acyclic). It returns how many aggregators end with rules other than before.
func (w *Replay) settle(touched []string) int {
	before := map[string][]rbacv1.PolicyRule{}
	sources := w.sources()
	for queue := touched; len(queue) > 0; {
		name := queue[0]
		queue = queue[1:]
		r := w.roles[name]
		if r == nil {
			continue
		}
		rules := rbac.Aggregate(name, w.selectors[name], sources)
		if rbac.RulesEqual(rules, r.Rules) {
			continue
		}
		if _, ok := before[name]; !ok {
			before[name] = r.Rules
		}
		r.Rules = rules
		sources = w.sources()
		queue = append(queue, w.selecting(name, r.Labels)...)
	}
	changed := 0
	for name, rules := range maps.All(before) {
		if !rbac.RulesEqual(rules, w.roles[name].Rules) {
			changed++
		}
	}
	return changed
}

func (w *Replay) sources() []rbac.Source {
	out := make([]rbac.Source, 0, len(w.roles))
	for _, r := range w.roles {
		out = append(out, rbac.Source{Name: r.Name, Labels: r.Labels, Rules: r.Rules})
	}
	return out
}
