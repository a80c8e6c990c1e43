//go:build bench

package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/test/aggregation/sidebyside"
)

// ruleChanges watches one side's ClusterRoles and counts, per aggregator, the updates
// that changed its rules. The bench never writes an aggregator's rules, so these are the
// controller's writes that did something; its other writes changed nothing (a no-op
// apply, e.g. from a stale view of its own previous write).
type ruleChanges struct {
	mu      sync.Mutex
	rules   map[string][]rbacv1.PolicyRule
	changes map[string]int
	stop    func()
}

func watchRuleChanges(ctx context.Context, s *sidebyside.Side) (*ruleChanges, error) {
	cs, err := kubernetes.NewForConfig(s.Env.Config)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", s.Name, err)
	}
	list, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %s's ClusterRoles: %w", s.Name, err)
	}
	w, err := cs.RbacV1().ClusterRoles().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watching %s's ClusterRoles: %w", s.Name, err)
	}
	rc := &ruleChanges{rules: map[string][]rbacv1.PolicyRule{}, changes: map[string]int{}, stop: w.Stop}
	for _, r := range list.Items {
		rc.rules[r.Name] = r.Rules
	}
	go rc.consume(w.ResultChan())
	return rc, nil
}

func (rc *ruleChanges) consume(events <-chan watch.Event) {
	for e := range events {
		role, ok := e.Object.(*rbacv1.ClusterRole)
		if !ok {
			continue
		}
		rc.mu.Lock()
		if e.Type == watch.Modified && role.AggregationRule != nil && !rbac.RulesEqual(rc.rules[role.Name], role.Rules) {
			rc.changes[role.Name]++
		}
		if e.Type == watch.Deleted {
			delete(rc.rules, role.Name)
		} else {
			rc.rules[role.Name] = role.Rules
		}
		rc.mu.Unlock()
	}
}

// byLevel sums the rule changes per corpus level (agg1, agg2, top, and the bootstrap
// aggregators admin/edit/view...), stopping the watch.
func (rc *ruleChanges) byLevel() (levels map[string]int, total int) {
	rc.stop()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	levels = map[string]int{}
	for name, n := range rc.changes {
		level := "bootstrap"
		switch {
		case strings.Contains(name, "agg1-"):
			level = "agg1"
		case strings.Contains(name, "agg2-"):
			level = "agg2"
		case strings.HasSuffix(name, "top"):
			level = "top"
		}
		levels[level] += n
		total += n
	}
	return levels, total
}

func formatLevels(levels map[string]int) string {
	keys := make([]string, 0, len(levels))
	for k := range levels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, levels[k])
	}
	return strings.Join(parts, ", ")
}
