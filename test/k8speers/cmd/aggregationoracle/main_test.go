package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// Small worlds with the rules written out by hand from upstream's documented behaviour
// (clusterroleaggregation_controller.go, syncClusterRole): for each selector in order,
// the matching ClusterRoles sorted by name, the role itself skipped, each rule appended
// unless an equal one (equality.Semantic: order inside a rule's lists matters, nil and
// empty lists are equal) is already there; aggregated sources contribute their current
// rules. None of it is computed here.

func rule(verb string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: resources}
}

var (
	getPods      = rule("get", "pods")
	listPods     = rule("list", "pods")
	watchJobs    = rbacv1.PolicyRule{Verbs: []string{"watch"}, APIGroups: []string{"batch"}, Resources: []string{"jobs"}}
	getSecretA   = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}
	getMetrics   = rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}
	getListPods  = rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	listGetPods  = rbacv1.PolicyRule{Verbs: []string{"list", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	getPodsEmpty = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{}}
)

func source(name string, l map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Rules: rules}
}

func aggregator(name string, l map[string]string, selectors []metav1.LabelSelector, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	r := source(name, l, rules...)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: selectors}
	return r
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func matchLabels(kv ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: labels(kv...)}
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestOracleCorpus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		world []rbacv1.ClusterRole
		want  []Result
	}{{
		name: "matchLabels: matching sources by name, not by input order; others left out",
		world: []rbacv1.ClusterRole{
			source("zeta", labels("team", "a"), watchJobs),
			source("alpha", labels("team", "a"), getPods, listPods),
			source("other", labels("team", "b"), getSecretA),
			aggregator("agg", nil, []metav1.LabelSelector{matchLabels("team", "a")}),
		},
		want: []Result{{Name: "agg", Rules: []rbacv1.PolicyRule{getPods, listPods, watchJobs}}},
	}, {
		name: "matchExpressions In, NotIn, Exists, DoesNotExist",
		world: []rbacv1.ClusterRole{
			source("a", labels("team", "a", "tier", "x"), getPods),
			source("b", labels("team", "b"), listPods),
			source("c", labels("team", "c", "tier", "x"), watchJobs),
			source("d", labels("other", "1"), getMetrics),
			aggregator("in", nil, []metav1.LabelSelector{expr("team", metav1.LabelSelectorOpIn, "a", "c")}),
			aggregator("notin", nil, []metav1.LabelSelector{expr("team", metav1.LabelSelectorOpNotIn, "a")}),
			aggregator("exists", nil, []metav1.LabelSelector{expr("tier", metav1.LabelSelectorOpExists)}),
			aggregator("doesnotexist", labels("team", "z"), []metav1.LabelSelector{expr("team", metav1.LabelSelectorOpDoesNotExist)}),
		},
		want: []Result{
			{Name: "in", Rules: []rbacv1.PolicyRule{getPods, watchJobs}},
			// NotIn matches roles without the label too: b, c, d, and the other
			// aggregators (no rules), but not a.
			{Name: "notin", Rules: []rbacv1.PolicyRule{listPods, watchJobs, getMetrics}},
			{Name: "exists", Rules: []rbacv1.PolicyRule{getPods, watchJobs}},
			// d and the unlabelled aggregators (which hold no rules).
			{Name: "doesnotexist", Rules: []rbacv1.PolicyRule{getMetrics}},
		},
	}, {
		name: "overlapping sources and selectors: first occurrence wins, selectors in order, nil equals empty, verb order matters",
		world: []rbacv1.ClusterRole{
			source("a", labels("team", "a"), getPods, getListPods),
			source("b", labels("team", "a", "tier", "x"), getPodsEmpty, listGetPods, watchJobs),
			source("c", labels("tier", "x"), getSecretA, getPods),
			aggregator("agg", nil, []metav1.LabelSelector{matchLabels("tier", "x"), matchLabels("team", "a")}),
		},
		// tier=x first: b (get pods with resourceNames [], list+get, watch jobs), c (get
		// secret a; get pods is b's again); then team=a: a (get pods again, get+list is
		// new: the verbs are in another order).
		want: []Result{{Name: "agg", Rules: []rbacv1.PolicyRule{getPodsEmpty, listGetPods, watchJobs, getSecretA, getListPods}}},
	}, {
		name: "an aggregated source gives its current rules, not what it will aggregate",
		world: []rbacv1.ClusterRole{
			source("a", labels("team", "a"), getPods),
			aggregator("level1", labels("level", "1"), []metav1.LabelSelector{matchLabels("team", "a")}, getMetrics),
			aggregator("level2", nil, []metav1.LabelSelector{matchLabels("level", "1")}),
		},
		want: []Result{
			{Name: "level1", Rules: []rbacv1.PolicyRule{getPods}},
			{Name: "level2", Rules: []rbacv1.PolicyRule{getMetrics}},
		},
	}, {
		name: "an empty selector matches every other role; the role itself is skipped",
		world: []rbacv1.ClusterRole{
			source("b", nil, listPods),
			source("a", labels("team", "a"), getPods),
			aggregator("all", labels("team", "a"), []metav1.LabelSelector{{}}, watchJobs),
		},
		want: []Result{{Name: "all", Rules: []rbacv1.PolicyRule{getPods, listPods}}},
	}, {
		name: "nothing matches, no selectors: no rules, where the role had some",
		world: []rbacv1.ClusterRole{
			source("a", labels("team", "a"), getPods),
			aggregator("none", nil, []metav1.LabelSelector{matchLabels("team", "b")}, getPods),
			aggregator("empty", nil, nil, getPods),
		},
		want: []Result{{Name: "none", Rules: []rbacv1.PolicyRule{}}, {Name: "empty", Rules: []rbacv1.PolicyRule{}}},
	}, {
		name: "a selector that does not convert: the sync's error",
		world: []rbacv1.ClusterRole{
			source("a", labels("team", "a"), getPods),
			aggregator("bad", nil, []metav1.LabelSelector{expr("team", "Near", "a")}),
			aggregator("good", nil, []metav1.LabelSelector{matchLabels("team", "a")}),
		},
		want: []Result{{Name: "bad", Error: `"Near" is not a valid label selector operator`}, {Name: "good", Rules: []rbacv1.PolicyRule{getPods}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Oracle(context.Background(), tc.world)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d results %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				// The same rules in the same order (inside a rule, nil and [] are equal, as
				// for upstream: the apply's JSON sends neither).
				if got[i].Name != tc.want[i].Name || got[i].Error != tc.want[i].Error || !equalExact(got[i].Rules, tc.want[i].Rules) {
					t.Errorf("result %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// equalExact is equality.Semantic.DeepEqual, except that no rules (an error) and an
// empty list of rules differ.
func equalExact(a, b []rbacv1.PolicyRule) bool {
	if a == nil && b != nil || a != nil && b == nil {
		return false
	}
	return equality.Semantic.DeepEqual(a, b)
}

// TestRunReadsListsAndArrays: the command's input, as kubectl prints a list or as a bare
// array, and its output.
func TestRunReadsListsAndArrays(t *testing.T) {
	world := []rbacv1.ClusterRole{
		source("a", labels("team", "a"), getPods),
		aggregator("agg", nil, []metav1.LabelSelector{matchLabels("team", "a")}),
	}
	list, err := json.Marshal(rbacv1.ClusterRoleList{Items: world})
	if err != nil {
		t.Fatal(err)
	}
	array, err := json.Marshal(world)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{list, array} {
		var out bytes.Buffer
		if err := run(bytes.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		var got []Result
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if len(got) != 1 || got[0].Name != "agg" || !equality.Semantic.DeepEqual(got[0].Rules, []rbacv1.PolicyRule{getPods}) {
			t.Errorf("input %.40s...: got %+v", in, got)
		}
	}
	if err := run(strings.NewReader(`[{"metadata":{"name":"a"}},{"metadata":{"name":"a"}}]`), &bytes.Buffer{}); err == nil {
		t.Error("two ClusterRoles named a: no error")
	}
}
