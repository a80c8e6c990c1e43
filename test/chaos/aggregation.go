package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
)

// The aggregation workload: labelled component ClusterRoles and aggregating ClusterRoles
// on two levels (the second selects the first), and the same for namespaced Roles with
// trustplane's annotation, churned: components created, deleted, relabelled and given
// new rules, aggregators given new selectors. kube-controller-manager does not run here:
// trustplane's controllers are the only ones aggregating, bootstrap admin/edit/view
// included.
//
// The expected rules, once settled, are what kube-controller-manager's own controller
// (k8s.io/kubernetes v1.37.1) applies given the roles as they are: the oracle
// test/k8speers/cmd/aggregationoracle (aggregation_oracle.go), not trustplane's
// internal/aggregation/rbac. The continuous check judges no rules of aggregators: while
// the workload churns they may lag by any number of changes, so only the settled state
// is compared.
const (
	aggregationNamespace = "chaos-aggregation"
	aggLabel             = "chaos.trustplane.io/"
	// ownedLabel marks every role of this workload: the continuous check lists by it.
	ownedLabel = aggLabel + "aggregation"
	// componentLabel is on every component, so that no selector (NotIn) reaches beyond
	// this workload's roles.
	componentLabel = aggLabel + "component"
	levelLabel     = aggLabel + "level"
	teamLabel      = aggLabel + "team"
	tierLabel      = aggLabel + "tier"
	aggComponents  = 10 // component names per kind, reused as they are deleted and created
)

// clusterSelectors are the aggregation rules a first-level aggregator takes turns with:
// matchLabels, In, NotIn and Exists, one or two selectors (order matters).
var clusterSelectors = [][]metav1.LabelSelector{
	{{MatchLabels: map[string]string{teamLabel: "a"}}},
	{{MatchLabels: map[string]string{teamLabel: "b"}}, {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: tierLabel, Operator: metav1.LabelSelectorOpExists}}}},
	{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: teamLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "c"}}}}},
	{{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: componentLabel, Operator: metav1.LabelSelectorOpExists}, {Key: teamLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}}},
	{{MatchLabels: map[string]string{teamLabel: "c", tierLabel: "x"}}, {MatchLabels: map[string]string{teamLabel: "a"}}},
}

// roleSelectors are the Role aggregators' annotations, in kubectl syntax.
var roleSelectors = []string{
	teamLabel + "=a",
	teamLabel + " in (a,c)",
	componentLabel + "," + teamLabel + " notin (a)",
	tierLabel,
	teamLabel + "=b," + tierLabel + "=x",
}

// rulePool holds rules that overlap on purpose (dedup across roles, nil against empty
// lists, the same verbs in another order).
var rulePool = []rbacv1.PolicyRule{
	{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
	{Verbs: []string{"list", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
	{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
	{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{}},
	{Verbs: []string{"watch"}, APIGroups: []string{"batch"}, Resources: []string{"jobs"}, ResourceNames: []string{"nightly"}},
	{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"configmaps"}},
	{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a", "b"}},
	{Verbs: []string{"*"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}},
}

// nonResourcePool are rules only a ClusterRole may hold.
var nonResourcePool = []rbacv1.PolicyRule{
	{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
	{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics", "/healthz"}},
}

// written is what the workload ever sent for one role: a write whose answer was lost
// may have happened, so every version sent is one the role may show.
type written struct {
	labels []map[string]string
	rules  [][]rbacv1.PolicyRule     // components
	rule   []*rbacv1.AggregationRule // ClusterRole aggregators
	annot  []string                  // Role aggregators
}

type aggregationSystem struct {
	// oracle is the path of the aggregation oracle, built at Setup.
	oracle  string
	mu      sync.Mutex
	cluster map[string]*written // by ClusterRole name
	roles   map[string]*written // by Role name
}

func newAggregation() System {
	return &aggregationSystem{cluster: map[string]*written{}, roles: map[string]*written{}}
}

func (s *aggregationSystem) Name() string { return "aggregation" }

func clusterComponentName(i int) string { return fmt.Sprintf("chaos-agg-component-%02d", i) }
func clusterAggregatorName(i int) string {
	return fmt.Sprintf("chaos-agg-level1-%d", i)
}

const (
	clusterAggregators = 3
	topAggregator      = "chaos-agg-level2"
	roleAggregators    = 2
)

func roleComponentName(i int) string  { return fmt.Sprintf("component-%02d", i) }
func roleAggregatorName(i int) string { return fmt.Sprintf("aggregator-%d", i) }

// Setup creates the aggregators (without rules: the controller's apply owns them from
// its first write) and half of the components, before the managers start.
func (s *aggregationSystem) Setup(ctx context.Context, h *Harness) error {
	oracle, err := aggregationOracle()
	if err != nil {
		return err
	}
	s.oracle = oracle
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aggregationNamespace}}); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(h.Seed, nameHash("aggregation-setup")))
	for i := range clusterAggregators {
		rule := &rbacv1.AggregationRule{ClusterRoleSelectors: clusterSelectors[i%len(clusterSelectors)]}
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterAggregatorName(i), Labels: map[string]string{ownedLabel: "aggregator", levelLabel: "1"}}, AggregationRule: rule}
		s.cluster[role.Name] = &written{labels: []map[string]string{role.Labels}, rule: []*rbacv1.AggregationRule{rule}}
		if err := h.Client.Create(ctx, role); err != nil {
			return err
		}
	}
	top := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{levelLabel: "1"}}, {MatchLabels: map[string]string{teamLabel: "c"}}}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: topAggregator, Labels: map[string]string{ownedLabel: "aggregator", levelLabel: "2"}}, AggregationRule: top}
	s.cluster[role.Name] = &written{labels: []map[string]string{role.Labels}, rule: []*rbacv1.AggregationRule{top}}
	if err := h.Client.Create(ctx, role); err != nil {
		return err
	}
	for i := range roleAggregators {
		annot := roleSelectors[i%len(roleSelectors)]
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: aggregationNamespace, Name: roleAggregatorName(i),
			Labels: map[string]string{ownedLabel: "aggregator"}, Annotations: map[string]string{roleaggregation.SelectorAnnotation: annot}}}
		s.roles[r.Name] = &written{labels: []map[string]string{r.Labels}, annot: []string{annot}}
		if err := h.Client.Create(ctx, r); err != nil {
			return err
		}
	}
	for i := 0; i < aggComponents; i += 2 {
		if err := s.createClusterComponent(ctx, h, rng, i); err != nil {
			return err
		}
		if err := s.createRoleComponent(ctx, h, rng, i); err != nil {
			return err
		}
	}
	return nil
}

func randomLabels(rng *rand.Rand) map[string]string {
	l := map[string]string{ownedLabel: "component", componentLabel: "true"}
	if rng.IntN(4) > 0 {
		l[teamLabel] = []string{"a", "b", "c"}[rng.IntN(3)]
	}
	if rng.IntN(2) == 0 {
		l[tierLabel] = "x"
	}
	return l
}

func randomRules(rng *rand.Rand, cluster bool) []rbacv1.PolicyRule {
	pool := rulePool
	if cluster {
		pool = append(slices.Clone(rulePool), nonResourcePool...)
	}
	var rules []rbacv1.PolicyRule
	for range rng.IntN(4) {
		rules = append(rules, *pool[rng.IntN(len(pool))].DeepCopy())
	}
	return rules
}

func (s *aggregationSystem) createClusterComponent(ctx context.Context, h *Harness, rng *rand.Rand, i int) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterComponentName(i), Labels: randomLabels(rng)}, Rules: randomRules(rng, true)}
	s.sent(s.cluster, role.Name, role.Labels, role.Rules)
	return h.Client.Create(ctx, role)
}

func (s *aggregationSystem) createRoleComponent(ctx context.Context, h *Harness, rng *rand.Rand, i int) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: aggregationNamespace, Name: roleComponentName(i), Labels: randomLabels(rng)}, Rules: randomRules(rng, false)}
	s.sent(s.roles, role.Name, role.Labels, role.Rules)
	return h.Client.Create(ctx, role)
}

// sent records a component's version before it is written.
func (s *aggregationSystem) sent(in map[string]*written, name string, l map[string]string, rules []rbacv1.PolicyRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := in[name]
	if w == nil {
		w = &written{}
		in[name] = w
	}
	w.labels = append(w.labels, maps.Clone(l))
	w.rules = append(w.rules, slices.Clone(rules))
}

func (s *aggregationSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	if rng.IntN(2) == 0 {
		return s.stepCluster(ctx, h, rng)
	}
	return s.stepRoles(ctx, h, rng)
}

func (s *aggregationSystem) stepCluster(ctx context.Context, h *Harness, rng *rand.Rand) error {
	roll := rng.IntN(100)
	if roll < 15 { // a first-level aggregator takes other selectors
		name := clusterAggregatorName(rng.IntN(clusterAggregators))
		role := &rbacv1.ClusterRole{}
		if err := h.Client.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
			return err
		}
		rule := &rbacv1.AggregationRule{ClusterRoleSelectors: clusterSelectors[rng.IntN(len(clusterSelectors))]}
		s.mu.Lock()
		s.cluster[name].rule = append(s.cluster[name].rule, rule)
		s.mu.Unlock()
		// A merge patch sends the aggregationRule only: the rules stay the controller's.
		patch := client.MergeFromWithOptions(role.DeepCopy(), client.MergeFromWithOptimisticLock{})
		role.AggregationRule = rule
		return h.Client.Patch(ctx, role, patch)
	}
	i := rng.IntN(aggComponents)
	role := &rbacv1.ClusterRole{}
	return s.churnComponent(ctx, h, rng, roll, s.cluster, client.ObjectKey{Name: clusterComponentName(i)}, role, &role.Rules, true,
		func() error { return s.createClusterComponent(ctx, h, rng, i) })
}

func (s *aggregationSystem) stepRoles(ctx context.Context, h *Harness, rng *rand.Rand) error {
	roll := rng.IntN(100)
	if roll < 15 { // an aggregating Role takes another selector
		name := roleAggregatorName(rng.IntN(roleAggregators))
		role := &rbacv1.Role{}
		if err := h.Client.Get(ctx, client.ObjectKey{Namespace: aggregationNamespace, Name: name}, role); err != nil {
			return err
		}
		annot := roleSelectors[rng.IntN(len(roleSelectors))]
		s.mu.Lock()
		s.roles[name].annot = append(s.roles[name].annot, annot)
		s.mu.Unlock()
		patch := client.MergeFromWithOptions(role.DeepCopy(), client.MergeFromWithOptimisticLock{})
		role.Annotations[roleaggregation.SelectorAnnotation] = annot
		return h.Client.Patch(ctx, role, patch)
	}
	i := rng.IntN(aggComponents)
	role := &rbacv1.Role{}
	return s.churnComponent(ctx, h, rng, roll, s.roles, client.ObjectKey{Namespace: aggregationNamespace, Name: roleComponentName(i)}, role, &role.Rules, false,
		func() error { return s.createRoleComponent(ctx, h, rng, i) })
}

// churnComponent changes the component role at key (a ClusterRole or a Role, read into
// role, whose rules are at rules): deleted, relabelled or given new rules by roll, or
// created when it is not there; in records what was sent.
func (s *aggregationSystem) churnComponent(ctx context.Context, h *Harness, rng *rand.Rand, roll int, in map[string]*written,
	key client.ObjectKey, role client.Object, rules *[]rbacv1.PolicyRule, clusterScoped bool, create func() error) error {
	err := h.Client.Get(ctx, key, role)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err != nil {
		return create()
	}
	patch := client.MergeFromWithOptions(role.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	switch {
	case roll < 35:
		return client.IgnoreNotFound(h.Client.Delete(ctx, role))
	case roll < 65:
		role.SetLabels(randomLabels(rng))
	default:
		*rules = randomRules(rng, clusterScoped)
	}
	s.sent(in, role.GetName(), role.GetLabels(), *rules)
	return h.Client.Patch(ctx, role, patch)
}

// Check: nothing but the workload changes what it wrote. The controllers write only
// the rules of aggregating roles: a component's labels and rules, and an aggregator's
// labels, aggregationRule and annotation, are always a version the workload sent.
func (s *aggregationSystem) Check(ctx context.Context, h *Harness) {
	crs := &rbacv1.ClusterRoleList{}
	if err := h.Client.List(ctx, crs, client.HasLabels{ownedLabel}); err != nil {
		return
	}
	roles := &rbacv1.RoleList{}
	if err := h.Client.List(ctx, roles, client.InNamespace(aggregationNamespace), client.HasLabels{ownedLabel}); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cr := range crs.Items {
		w := s.cluster[cr.Name]
		switch {
		case w == nil:
			h.Check("aggregation: nothing else changed", false, "ClusterRole %s (resourceVersion %s) carries %s but the workload never created it", cr.Name, cr.ResourceVersion, ownedLabel)
		case cr.Labels[ownedLabel] == "aggregator":
			h.Check("aggregation: nothing else changed", sentLabels(w, cr.Labels) && slices.ContainsFunc(w.rule, func(r *rbacv1.AggregationRule) bool {
				return apiequality.Semantic.DeepEqual(r, cr.AggregationRule)
			}), "aggregating ClusterRole %s (resourceVersion %s): labels %v, aggregationRule %v: not a version the workload sent", cr.Name, cr.ResourceVersion, cr.Labels, cr.AggregationRule)
		default:
			h.Check("aggregation: nothing else changed", cr.AggregationRule == nil && sentComponent(w, cr.Labels, cr.Rules),
				"component ClusterRole %s (resourceVersion %s): labels %v, rules %v, aggregationRule %v: not a version the workload sent", cr.Name, cr.ResourceVersion, cr.Labels, cr.Rules, cr.AggregationRule)
		}
	}
	for _, r := range roles.Items {
		w := s.roles[r.Name]
		switch {
		case w == nil:
			h.Check("aggregation: nothing else changed", false, "Role %s/%s (resourceVersion %s) carries %s but the workload never created it", r.Namespace, r.Name, r.ResourceVersion, ownedLabel)
		case r.Labels[ownedLabel] == "aggregator":
			h.Check("aggregation: nothing else changed", sentLabels(w, r.Labels) && slices.Contains(w.annot, r.Annotations[roleaggregation.SelectorAnnotation]),
				"aggregating Role %s/%s (resourceVersion %s): labels %v, annotation %q: not a version the workload sent", r.Namespace, r.Name, r.ResourceVersion, r.Labels, r.Annotations[roleaggregation.SelectorAnnotation])
		default:
			_, annotated := r.Annotations[roleaggregation.SelectorAnnotation]
			h.Check("aggregation: nothing else changed", !annotated && sentComponent(w, r.Labels, r.Rules),
				"component Role %s/%s (resourceVersion %s): labels %v, rules %v: not a version the workload sent", r.Namespace, r.Name, r.ResourceVersion, r.Labels, r.Rules)
		}
	}
}

func sentLabels(w *written, l map[string]string) bool {
	return slices.ContainsFunc(w.labels, func(sent map[string]string) bool { return maps.Equal(sent, l) })
}

// sentComponent: labels and rules as one version sent together (a patch changes one or
// the other, and every version records both).
func sentComponent(w *written, l map[string]string, rules []rbacv1.PolicyRule) bool {
	for i := range w.labels {
		if maps.Equal(w.labels[i], l) && apiequality.Semantic.DeepEqual(w.rules[i], rules) {
			return true
		}
	}
	return false
}

// Settle: every aggregating ClusterRole in the cluster (bootstrap admin, edit and view
// included) and every annotated Role of the workload holds exactly the rules
// kube-controller-manager's own controller applies given the roles as they are (the
// oracle, aggregation_oracle.go); and nothing else changed.
func (s *aggregationSystem) Settle(ctx context.Context, h *Harness) {
	settleAggregated(ctx, h, "aggregation: aggregated ClusterRoles as kube-controller-manager computes them", s.oracle, clusterRoleWorld(h))
	settleAggregated(ctx, h, "aggregation: aggregated Roles as the ClusterRole merge computes them", s.oracle, roleWorld(h))
	s.Check(ctx, h)
	s.mu.Lock()
	versions := 0
	for _, w := range s.cluster {
		versions += len(w.labels) + len(w.rule)
	}
	for _, w := range s.roles {
		versions += len(w.labels) + len(w.annot)
	}
	h.Logf("aggregation: %d ClusterRoles and %d Roles, %d versions written", len(s.cluster), len(s.roles), versions)
	s.mu.Unlock()
}

// clusterRoleWorld lists every ClusterRole, for the oracle.
func clusterRoleWorld(h *Harness) func(ctx context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
	return func(ctx context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
		list := &rbacv1.ClusterRoleList{}
		if err := h.Client.List(ctx, list); err != nil {
			return nil, nil, nil, err
		}
		rv := map[string]string{}
		for _, cr := range list.Items {
			rv[cr.Name] = cr.ResourceVersion
		}
		return list.Items, func(cr rbacv1.ClusterRole) string {
			return fmt.Sprintf("ClusterRole %s (resourceVersion %s)", cr.Name, rv[cr.Name])
		}, nil, nil
	}
}

// roleWorld lists the workload's Roles, as ClusterRoles for the oracle: trustplane's
// namespaced aggregation states the ClusterRole merge's semantics.
func roleWorld(h *Harness) func(ctx context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
	return func(ctx context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error) {
		list := &rbacv1.RoleList{}
		if err := h.Client.List(ctx, list, client.InNamespace(aggregationNamespace)); err != nil {
			return nil, nil, nil, err
		}
		byName := map[string]rbacv1.Role{}
		for _, r := range list.Items {
			byName[r.Name] = r
		}
		describe := func(cr rbacv1.ClusterRole) string {
			r := byName[cr.Name]
			return fmt.Sprintf("Role %s/%s (resourceVersion %s, selector %q)", r.Namespace, r.Name, r.ResourceVersion, r.Annotations[roleaggregation.SelectorAnnotation])
		}
		roles, bad := rolesAsClusterRoles(list.Items)
		var early []string
		for name, err := range bad {
			early = append(early, fmt.Sprintf("%s: selector does not parse: %v", describe(rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}), err))
		}
		return roles, describe, early, nil
	}
}
