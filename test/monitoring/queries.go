// Package monitoring checks trustplane's alerts, dashboard and Prometheus Operator
// objects: every alert passes `promtool test rules` firing and not firing and has a
// runbook, every dashboard query parses, the chart's copies are current and what it
// renders is well-formed. test/e2e checks, with Queries, that every metric they query is
// exported by the running processes.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The sources of truth, relative to the repository root; the chart holds copies in files/.
const (
	RulesFile     = "config/prometheus/trustplane-rules.yaml"
	RuleTestsDir  = "config/prometheus/tests"
	DashboardFile = "config/grafana/trustplane-dashboard.json"
	// ChartFiles is where the chart's copies are (make manifests copies them).
	ChartFiles = "charts/trustplane/files"
)

// RuleGroups is a Prometheus rules file.
type RuleGroups struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting or recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LoadRules reads the rules file under root.
func LoadRules(root string) (*RuleGroups, error) {
	raw, err := os.ReadFile(filepath.Join(root, RulesFile))
	if err != nil {
		return nil, err
	}
	rules := &RuleGroups{}
	if err := yaml.UnmarshalStrict(raw, rules); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesFile, err)
	}
	return rules, nil
}

// Alerts are the alerting rules of every group.
func (g *RuleGroups) Alerts() []Rule {
	var out []Rule
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// Dashboard is what the tests read of the Grafana dashboard.
type Dashboard struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is a dashboard panel or row.
type Panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// LoadDashboard reads the dashboard under root.
func LoadDashboard(root string) (*Dashboard, error) {
	raw, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return d, nil
}

// Query is one PromQL expression of an alert or a dashboard panel.
type Query struct {
	// Where names it: "alert X" or "panel Y (A)".
	Where string
	Expr  string
}

// Queries are every alert's and every dashboard panel's expressions.
func Queries(root string) ([]Query, error) {
	rules, err := LoadRules(root)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, a := range rules.Alerts() {
		out = append(out, Query{Where: "alert " + a.Alert, Expr: a.Expr})
	}
	d, err := LoadDashboard(root)
	if err != nil {
		return nil, err
	}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Where: fmt.Sprintf("panel %q (%s)", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	return out, nil
}

// metricName matches the metric names trustplane's queries use: its own, and
// controller-runtime's and client-go's work queue metrics.
var metricName = regexp.MustCompile(`\b(?:trustplane|controller_runtime|workqueue)_[a-z_]+\b`)

// MetricNames are the metric families expr reads: a histogram's _bucket, _sum and _count
// series are its family's.
func MetricNames(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}
