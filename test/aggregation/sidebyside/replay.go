package sidebyside

import (
	"fmt"
	"sort"

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
	// members are, for each aggregator, the other roles its selectors match: kept up to
	// date role by role, so that an aggregator is recomputed from its own members and
	// not from a scan of every role (20,000 of them in the bench).
	members map[string]map[string]bool
}

// NewReplay starts from a converged list of ClusterRoles.
func NewReplay(start []rbacv1.ClusterRole) *Replay {
	w := &Replay{roles: map[string]*rbacv1.ClusterRole{}, selectors: map[string][]labels.Selector{}, members: map[string]map[string]bool{}}
	for i := range start {
		w.roles[start[i].Name] = start[i].DeepCopy()
	}
	for name, r := range w.roles {
		w.setSelectors(r)
		w.rescan(name)
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

// setSelectors records r's parsed selectors, or forgets them when r does not aggregate.
func (w *Replay) setSelectors(r *rbacv1.ClusterRole) {
	delete(w.selectors, r.Name)
	if r.AggregationRule == nil {
		delete(w.members, r.Name)
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

// rescan finds an aggregator's members among every role.
func (w *Replay) rescan(aggregator string) {
	sel, ok := w.selectors[aggregator]
	if !ok {
		return
	}
	m := map[string]bool{}
	for name, r := range w.roles {
		if name != aggregator && matchesAny(sel, r.Labels) {
			m[name] = true
		}
	}
	w.members[aggregator] = m
}

// place puts role name in or out of every other aggregator's members, by its labels now
// (gone: out of all), and returns the aggregators it was or is a member of.
func (w *Replay) place(name string) []string {
	r := w.roles[name]
	var affected []string
	for agg, sel := range w.selectors {
		if agg == name {
			continue
		}
		was := w.members[agg][name]
		is := r != nil && matchesAny(sel, r.Labels)
		if is {
			w.members[agg][name] = true
		} else {
			delete(w.members[agg], name)
		}
		if was || is {
			affected = append(affected, agg)
		}
	}
	return affected
}

func matchesAny(sel []labels.Selector, l map[string]string) bool {
	for _, s := range sel {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// apply performs op as the API server would and returns the aggregators it may have
// changed the result of: those the role was or is a member of, and the role itself when
// it aggregates (one that no longer does keeps its rules, as with the controllers).
func (w *Replay) apply(op Op) ([]string, error) {
	old := w.roles[op.Name]
	switch {
	case op.Create != nil:
		w.roles[op.Name] = op.Create.DeepCopy()
	case op.Delete:
		delete(w.roles, op.Name)
	case old == nil:
		return nil, nil // a patch of a role already gone: the API server's NotFound
	default:
		r := old.DeepCopy()
		if err := mergePatch(r, op.Patch); err != nil {
			return nil, err
		}
		w.roles[op.Name] = r
	}
	if r := w.roles[op.Name]; r != nil {
		w.setSelectors(r)
	} else {
		delete(w.selectors, op.Name)
		delete(w.members, op.Name)
	}
	touched := w.place(op.Name)
	if _, ok := w.selectors[op.Name]; ok {
		w.rescan(op.Name)
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

// settle recomputes aggregators, starting from touched and following each changed one
// to the aggregators it is a member of, until nothing changes (selection in the corpus is
// acyclic). It returns how many aggregators end with rules other than before.
func (w *Replay) settle(touched []string) int {
	before := map[string][]rbacv1.PolicyRule{}
	pending := map[string]bool{}
	var queue []string
	push := func(names ...string) {
		for _, n := range names {
			if !pending[n] {
				pending[n] = true
				queue = append(queue, n)
			}
		}
	}
	push(touched...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		delete(pending, name)
		r, sel := w.roles[name], w.selectors[name]
		if r == nil || sel == nil && w.members[name] == nil {
			continue
		}
		rules := rbac.Aggregate(name, sel, w.candidates(name))
		if rbac.RulesEqual(rules, r.Rules) {
			continue
		}
		if _, ok := before[name]; !ok {
			before[name] = r.Rules
		}
		r.Rules = rules
		push(w.containing(name)...)
	}
	changed := 0
	for name, rules := range before {
		if !rbac.RulesEqual(rules, w.roles[name].Rules) {
			changed++
		}
	}
	return changed
}

// candidates are an aggregator's members as rbac.Aggregate takes them.
func (w *Replay) candidates(aggregator string) []rbac.Source {
	out := make([]rbac.Source, 0, len(w.members[aggregator]))
	for name := range w.members[aggregator] {
		r := w.roles[name]
		out = append(out, rbac.Source{Name: r.Name, Labels: r.Labels, Rules: r.Rules})
	}
	return out
}

// containing lists, sorted, the aggregators name is a member of.
func (w *Replay) containing(name string) []string {
	var out []string
	for agg, m := range w.members {
		if m[name] {
			out = append(out, agg)
		}
	}
	sort.Strings(out)
	return out
}
