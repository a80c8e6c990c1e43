package clusterroleaggregation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

var ctx = context.Background()

func startManager(t *testing.T) {
	t.Helper()
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, DefaultOptions()); return err })
}

var prefixCounter int

// prefix keeps each test's ClusterRoles (cluster-scoped) apart.
func prefix(t *testing.T) string {
	prefixCounter++
	return fmt.Sprintf("t%d-", prefixCounter)
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func createRole(t *testing.T, name string, lbls map[string]string, agg *rbacv1.AggregationRule, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, AggregationRule: agg, Rules: rules}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
}

func selectors(sets ...map[string]string) *rbacv1.AggregationRule {
	agg := &rbacv1.AggregationRule{}
	for _, s := range sets {
		agg.ClusterRoleSelectors = append(agg.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return agg
}

func getRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
		t.Fatal(err)
	}
	return role
}

func waitRules(t *testing.T, name string, want ...rbacv1.PolicyRule) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := getRole(t, name).Rules
		if rbac.RulesEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s rules = %v, want %v", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRulesInNameOrderAcrossSelectorsWithoutDuplicates(t *testing.T) {
	startManager(t)
	p := prefix(t)
	createRole(t, p+"zz", map[string]string{p + "a": "true"}, nil, rule("get", "pods"), rule("list", "pods"))
	createRole(t, p+"aa", map[string]string{p + "a": "true"}, nil, rule("watch", "pods"), rule("get", "pods"))
	createRole(t, p+"mm", map[string]string{p + "b": "true"}, nil, rule("get", "secrets"), rule("list", "pods"))
	createRole(t, p+"agg", map[string]string{p + "a": "true"}, selectors(map[string]string{p + "a": "true"}, map[string]string{p + "b": "true"}),
		rule("delete", "everything"))
	// Selector 1 in name order (aa, zz; agg itself skipped), then selector 2; first occurrence wins.
	waitRules(t, p+"agg", rule("watch", "pods"), rule("get", "pods"), rule("list", "pods"), rule("get", "secrets"))
}

func TestDeadRulesRemovedAndEverythingStrippedWhenNothingMatches(t *testing.T) {
	startManager(t)
	p := prefix(t)
	createRole(t, p+"src1", map[string]string{p + "x": "1"}, nil, rule("get", "pods"))
	createRole(t, p+"src2", map[string]string{p + "x": "1"}, nil, rule("get", "nodes"))
	createRole(t, p+"agg", nil, selectors(map[string]string{p + "x": "1"}))
	waitRules(t, p+"agg", rule("get", "pods"), rule("get", "nodes"))

	src := getRole(t, p+"src1")
	src.Labels = map[string]string{p + "x": "2"}
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitRules(t, p+"agg", rule("get", "nodes"))

	// A rules-only edit of a matching role propagates.
	src2 := getRole(t, p+"src2")
	src2.Rules = []rbacv1.PolicyRule{rule("list", "nodes")}
	if err := env.Client.Update(ctx, src2); err != nil {
		t.Fatal(err)
	}
	waitRules(t, p+"agg", rule("list", "nodes"))

	if err := env.Client.Delete(ctx, src2); err != nil {
		t.Fatal(err)
	}
	waitRules(t, p+"agg")
}

// counting wraps the real API server, counting writes and optionally replacing Apply.
type counting struct {
	writes  atomic.Int32
	updates atomic.Int32
	apply   func() error
}

func (c *counting) client(t *testing.T) client.Client {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			c.writes.Add(1)
			if c.apply != nil {
				if err := c.apply(); err != nil {
					return err
				}
			}
			return cl.Apply(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			c.writes.Add(1)
			c.updates.Add(1)
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			c.writes.Add(1)
			return cl.Patch(ctx, obj, p, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			c.writes.Add(1)
			return cl.Create(ctx, obj, opts...)
		},
	})
}

func direct(t *testing.T, c *counting) *Reconciler {
	t.Helper()
	w := c.client(t)
	return &Reconciler{Reader: w, Writer: w, Live: w, Index: rbac.NewIndex()}
}

func reconcileRole(t *testing.T, r *Reconciler, name string) error {
	t.Helper()
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	return err
}

func TestNoAPIWriteWhenNothingChanged(t *testing.T) {
	p := prefix(t)
	c := &counting{}
	r := direct(t, c)
	createRole(t, p+"src", map[string]string{p + "k": "v"}, nil, rule("get", "pods"))
	createRole(t, p+"agg", nil, selectors(map[string]string{p + "k": "v"}))
	if err := reconcileRole(t, r, p+"agg"); err != nil || c.writes.Load() != 1 {
		t.Fatalf("first sync: err %v, writes %d", err, c.writes.Load())
	}
	for range 3 {
		if err := reconcileRole(t, r, p+"agg"); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.writes.Load(); n != 1 {
		t.Errorf("%d writes for 3 syncs with nothing changed, want none", n-1)
	}
	// A role without an aggregationRule is never written.
	if err := reconcileRole(t, r, p+"src"); err != nil || c.writes.Load() != 1 {
		t.Errorf("non-aggregating role: err %v, writes %d", err, c.writes.Load())
	}
}

// TestUnsupportedMediaTypeFallsBackToUpdate: a server without apply (415) gets the same
// rules through an Update.
func TestUnsupportedMediaTypeFallsBackToUpdate(t *testing.T) {
	p := prefix(t)
	createRole(t, p+"src", map[string]string{p + "k": "v"}, nil, rule("get", "pods"), rule("list", "pods"))
	createRole(t, p+"via-apply", nil, selectors(map[string]string{p + "k": "v"}))
	createRole(t, p+"via-update", nil, selectors(map[string]string{p + "k": "v"}))

	if err := reconcileRole(t, direct(t, &counting{}), p+"via-apply"); err != nil {
		t.Fatal(err)
	}
	no415 := &counting{apply: func() error {
		return apierrors.NewGenericServerResponse(415, "PATCH", rbacv1.Resource("clusterroles"), "", "apply not supported", 0, false)
	}}
	if err := reconcileRole(t, direct(t, no415), p+"via-update"); err != nil {
		t.Fatal(err)
	}
	if no415.updates.Load() != 1 {
		t.Fatalf("updates = %d, want the fallback's one", no415.updates.Load())
	}
	applied, updated := getRole(t, p+"via-apply"), getRole(t, p+"via-update")
	if !rbac.RulesEqual(applied.Rules, updated.Rules) || len(updated.Rules) != 2 {
		t.Errorf("fallback wrote %v, apply wrote %v", updated.Rules, applied.Rules)
	}
	if updated.AggregationRule == nil {
		t.Error("the Update lost the aggregationRule")
	}
}

// TestBadSelectorIsRetried: the API server rejects invalid selectors, so the fault is
// injected at the read: the sync returns the error for a rate-limited retry.
func TestBadSelectorIsRetried(t *testing.T) {
	p := prefix(t)
	createRole(t, p+"agg", nil, selectors(map[string]string{p + "k": "v"}))
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	reader := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := cl.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			obj.(*rbacv1.ClusterRole).AggregationRule.ClusterRoleSelectors[0].MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: "In"}}
			return nil
		},
	})
	r := &Reconciler{Reader: reader, Writer: base, Index: rbac.NewIndex()}
	err = reconcileRole(t, r, p+"agg")
	if err == nil || errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
}

func TestRoleDeletedMidFlight(t *testing.T) {
	startManager(t)
	p := prefix(t)
	createRole(t, p+"src", map[string]string{p + "k": "v"}, nil, rule("get", "pods"))
	createRole(t, p+"agg", nil, selectors(map[string]string{p + "k": "v"}))
	waitRules(t, p+"agg", rule("get", "pods"))
	// Delete the aggregator while its sources churn: it must not come back.
	if err := env.Client.Delete(ctx, getRole(t, p+"agg")); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		src := getRole(t, p+"src")
		src.Rules = []rbacv1.PolicyRule{rule(fmt.Sprintf("verb%d", i), "pods")}
		if err := env.Client.Update(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	// And a sync of a name that no longer exists is a clean no-op.
	if err := reconcileRole(t, direct(t, &counting{}), p+"agg"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := env.Client.Get(ctx, client.ObjectKey{Name: p + "agg"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted aggregator: %v", err)
	}
}

func TestFieldManagerAndApplyShape(t *testing.T) {
	startManager(t)
	p := prefix(t)
	createRole(t, p+"src", map[string]string{p + "k": "v"}, nil, rule("get", "pods"))
	createRole(t, p+"agg", map[string]string{"keep": "me"}, selectors(map[string]string{p + "k": "v"}))
	waitRules(t, p+"agg", rule("get", "pods"))
	role := getRole(t, p+"agg")
	var managers []string
	for _, mf := range role.ManagedFields {
		managers = append(managers, mf.Manager+"/"+string(mf.Operation))
	}
	found := false
	for _, m := range managers {
		found = found || m == FieldOwner+"/Apply"
	}
	if !found {
		t.Errorf("managed fields %v lack %s/Apply", managers, FieldOwner)
	}
	if role.Labels["keep"] != "me" || role.AggregationRule == nil {
		t.Error("the apply touched more than the rules")
	}
}

// TestAnAggregatorSyncsAfterTheAggregatorsItReads: two roles created together change
// admin's result directly (one admin selects) and through view and edit (one view
// selects). Admin waits for view and edit to sync, so it writes its new rules once, not
// first a result without the second role's.
func TestAnAggregatorSyncsAfterTheAggregatorsItReads(t *testing.T) {
	startManager(t)
	p := prefix(t)
	to := func(role string) map[string]string { return map[string]string{p + "aggregate-to-" + role: "true"} }
	createRole(t, p+"admin", nil, selectors(to("admin")))
	createRole(t, p+"edit", to("admin"), selectors(to("edit")))
	createRole(t, p+"view", to("edit"), selectors(to("view")))
	createRole(t, p+"pods", to("view"), nil, rule("get", "pods"))
	waitRules(t, p+"admin", rule("get", "pods"))

	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &rbacv1.ClusterRoleList{}, client.MatchingFields{"metadata.name": p + "admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createRole(t, p+"direct", to("admin"), nil, rule("get", "secrets"))
	createRole(t, p+"viewed", to("view"), nil, rule("get", "configmaps"))
	want := []rbacv1.PolicyRule{rule("get", "secrets"), rule("get", "pods"), rule("get", "configmaps")}
	waitRules(t, p+"admin", want...)
	time.Sleep(2 * DefaultOptions().QuietPeriod) // a later write would come within this

	var results [][]rbacv1.PolicyRule
	for done := false; !done; {
		select {
		case e := <-w.ResultChan():
			if role, ok := e.Object.(*rbacv1.ClusterRole); ok && e.Type == watch.Modified {
				results = append(results, role.Rules)
			}
		case <-time.After(time.Second): // the watch has told all it holds
			done = true
		}
	}
	if len(results) != 1 || !rbac.RulesEqual(results[0], want) {
		t.Errorf("admin was written %d times (%v), want once with %v", len(results), results, want)
	}
}
