package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// promtool is Debian's (package prometheus), which hack/install-test-deps.sh installs.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if _, statErr := os.Stat("/usr/bin/promtool"); statErr != nil {
			t.Fatal("promtool is not installed: `make test` installs it (hack/install-test-deps.sh, Debian's prometheus package)")
		}
		path = "/usr/bin/promtool"
	}
	return path
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = testenv.RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// TestAlertsPassPromtool: the rules file is valid, and every unit test of it passes.
func TestAlertsPassPromtool(t *testing.T) {
	bin := promtool(t)
	run(t, bin, "check", "rules", RulesFile)
	tests, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), RuleTestsDir, "*.yaml"))
	if len(tests) == 0 {
		t.Fatalf("no promtool tests in %s", RuleTestsDir)
	}
	run(t, bin, append([]string{"test", "rules"}, tests...)...)
}

// ruleTests is what this test reads of a promtool test file.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTests []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertIsTestedFiringAndNotFiring: for each alert, some promtool test expects it
// to fire (with its annotations) and some expects it silent.
func TestEveryAlertIsTestedFiringAndNotFiring(t *testing.T) {
	root := testenv.RepoRoot()
	rules, err := LoadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	firing, silent := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(root, RuleTestsDir, "*.yaml"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		if err := yaml.Unmarshal(raw, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Contains(rt.RuleFiles, "../"+filepath.Base(RulesFile)) {
			t.Errorf("%s does not test %s: rule_files %v", f, RulesFile, rt.RuleFiles)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTests {
				if len(a.ExpAlerts) == 0 {
					silent[a.Alertname] = true
					continue
				}
				firing[a.Alertname] = true
				for _, exp := range a.ExpAlerts {
					if exp.ExpAnnotations["description"] == "" {
						t.Errorf("%s: %s at %s is expected without its annotations", filepath.Base(f), a.Alertname, a.EvalTime)
					}
				}
			}
		}
	}
	for _, a := range rules.Alerts() {
		if !firing[a.Alert] {
			t.Errorf("no promtool test expects %s to fire", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("no promtool test expects %s not to fire", a.Alert)
		}
	}
}

// objectLabels are the labels an alert's description may name its object by.
var objectLabels = regexp.MustCompile(`\$labels\.(name|pod|signer_name|controller)\b`)

// TestEveryAlertHasARunbook: a severity, a summary, a description naming the object, and a
// runbook_url pointing at its own section of docs/operations.md.
func TestEveryAlertHasARunbook(t *testing.T) {
	root := testenv.RepoRoot()
	rules, err := LoadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range rules.Alerts() {
		if seen[a.Alert] {
			t.Errorf("alert %s is defined twice", a.Alert)
		}
		seen[a.Alert] = true
		if !strings.HasPrefix(a.Alert, "Trustplane") {
			t.Errorf("alert %s: its name does not start with Trustplane", a.Alert)
		}
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", a.Alert, s)
		}
		if a.For == "" {
			t.Errorf("alert %s fires without a for: duration", a.Alert)
		}
		if a.Annotations["summary"] == "" {
			t.Errorf("alert %s has no summary", a.Alert)
		}
		if !objectLabels.MatchString(a.Annotations["description"]) {
			t.Errorf("alert %s: its description names no object ($labels.name, .pod, .signer_name or .controller): %q", a.Alert, a.Annotations["description"])
		}
		anchor := strings.ToLower(a.Alert)
		if want := "https://github.com/trustplane/trustplane/blob/main/docs/operations.md#" + anchor; a.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !regexp.MustCompile(`(?m)^### ` + a.Alert + `$`).Match(ops) {
			t.Errorf("docs/operations.md has no section \"### %s\" (the runbook_url's anchor #%s)", a.Alert, anchor)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^### (Trustplane\w+)$`).FindAllSubmatch(ops, -1) {
		if !seen[string(m[1])] {
			t.Errorf("docs/operations.md has a runbook for %s, which is no alert", m[1])
		}
	}
}

// systems are the dashboard's rows: one per system (docs/architecture.md), then the
// controllers.
var systems = []string{"JWKS", "ClusterRole and Role aggregation", "Secret global consistency", "Pod certificates",
	"Clusters, subscriptions and kubeconfigs", "Controllers"}

// TestDashboardHasARowPerSystemAndItsQueriesParse: the rows, and every panel's query
// parsed by Prometheus's own parser (promtool check rules on them as recording rules).
func TestDashboardHasARowPerSystemAndItsQueriesParse(t *testing.T) {
	root := testenv.RepoRoot()
	d, err := LoadDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	group := RuleGroup{Name: "dashboard"}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			if len(MetricNames(target.Expr)) == 0 {
				t.Errorf("panel %q (%s) reads no trustplane or controller-runtime metric: %s", p.Title, target.RefID, target.Expr)
			}
			group.Rules = append(group.Rules, Rule{Record: fmt.Sprintf("dashboard:panel_%d_%s", p.ID, target.RefID), Expr: target.Expr})
		}
	}
	if !slices.Equal(rows, systems) {
		t.Errorf("dashboard rows %q, want %q", rows, systems)
	}
	raw, err := yaml.Marshal(RuleGroups{Groups: []RuleGroup{group}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, promtool(t), "check", "rules", path)
}

// TestChartCopiesAreCurrent: the chart ships exactly the rules and the dashboard of
// config/ (make manifests copies them).
func TestChartCopiesAreCurrent(t *testing.T) {
	root := testenv.RepoRoot()
	for _, f := range []string{RulesFile, DashboardFile} {
		want, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(ChartFiles, filepath.Base(f))
		got, err := os.ReadFile(filepath.Join(root, copied))
		if err != nil || !bytes.Equal(want, got) {
			t.Errorf("%s is not a copy of %s: run `make manifests` (%v)", copied, f, err)
		}
	}
}

// render is the chart rendered with sets.
func render(t *testing.T, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "tp", filepath.Join(testenv.RepoRoot(), "charts/trustplane"), "--namespace", "trustplane-system"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return testenv.DecodeYAML(t, run(t, testenv.Tool(t, "helm"), args...))
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, objs []*unstructured.Unstructured, kind, nameSuffix string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range byKind(objs, kind) {
		if strings.HasSuffix(o.GetName(), nameSuffix) {
			return o
		}
	}
	t.Fatalf("the render has no %s *%s", kind, nameSuffix)
	return nil
}

func str(o *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, path...)
	return s
}

func strMap(o map[string]any, path ...string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(o, path...)
	return m
}

// containerPorts are the named ports of a pod template's containers, init containers
// (native sidecars) included.
func containerPorts(t *testing.T, o *unstructured.Unstructured) map[string]bool {
	t.Helper()
	pod := corev1.PodSpec{}
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	testenv.FromUnstructured(t, &unstructured.Unstructured{Object: spec}, &pod)
	ports := map[string]bool{}
	for _, c := range append(pod.Containers, pod.InitContainers...) {
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
	}
	return ports
}

var monitoringKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}

// TestChartMonitoringIsOffByDefault: none of it without asking.
func TestChartMonitoringIsOffByDefault(t *testing.T) {
	objs := render(t, "nodeAgent.enabled=true", "dataplane.namespaces={web}")
	for _, kind := range monitoringKinds {
		if n := len(byKind(objs, kind)); n != 0 {
			t.Errorf("the default render has %d %s", n, kind)
		}
	}
	for _, cm := range byKind(objs, "ConfigMap") {
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			t.Errorf("the default render has the dashboard ConfigMap %s", cm.GetName())
		}
	}
}

// TestChartRendersMonitoring renders everything on and checks each object fits what it
// scrapes or ships: the ServiceMonitor selects the metrics Service, which selects the
// manager's pods and their HTTPS metrics port, with a bearer token and the reader binding;
// the PodMonitors select the node agent's pods and port and the sidecar's port; the
// PrometheusRule holds exactly the rules file's groups, valid for promtool as rendered;
// the dashboard ConfigMap holds the dashboard with the sidecar's label. The objects
// Kubernetes knows are applied with a server-side dry run.
func TestChartRendersMonitoring(t *testing.T) {
	root := testenv.RepoRoot()
	objs := render(t, "serviceMonitor.enabled=true", "podMonitor.enabled=true", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true",
		"nodeAgent.enabled=true", "dataplane.namespaces={web,edge}", "serviceMonitor.scraper.serviceAccount=prometheus",
		"serviceMonitor.scraper.namespace=monitoring", "serviceMonitor.additionalLabels.release=prometheus", "prometheusRule.additionalLabels.release=prometheus")

	t.Run("ServiceMonitor", func(t *testing.T) {
		sm := one(t, objs, "ServiceMonitor", "-manager")
		if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prometheus" {
			t.Errorf("ServiceMonitor %s: apiVersion %s labels %v", sm.GetName(), sm.GetAPIVersion(), sm.GetLabels())
		}
		svc := one(t, objs, "Service", "-metrics")
		selector := labels.SelectorFromSet(strMap(sm.Object, "spec", "selector", "matchLabels"))
		namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		if !selector.Matches(labels.Set(svc.GetLabels())) || !slices.Contains(namespaces, svc.GetNamespace()) {
			t.Errorf("the ServiceMonitor (selector %s in %v) does not select the metrics Service %s/%s %v", selector, namespaces, svc.GetNamespace(), svc.GetName(), svc.GetLabels())
		}
		if jwks := one(t, objs, "Service", "-jwks"); selector.Matches(labels.Set(jwks.GetLabels())) {
			t.Error("the ServiceMonitor selects the JWKS Service too")
		}
		deployment := one(t, objs, "Deployment", "-manager")
		podLabels := strMap(deployment.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(strMap(svc.Object, "spec", "selector")).Matches(labels.Set(podLabels)) {
			t.Errorf("the metrics Service does not select the manager's pods %v", podLabels)
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["name"] != "metrics" || ports[0].(map[string]any)["targetPort"] != "metrics" || !containerPorts(t, deployment)["metrics"] {
			t.Errorf("the metrics Service's ports %v do not lead to the manager's port named metrics", ports)
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints %v", endpoints)
		}
		ep := endpoints[0].(map[string]any)
		skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
		if ep["port"] != "metrics" || ep["scheme"] != "https" || ep["path"] != "/metrics" || !skip ||
			ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
			t.Errorf("the ServiceMonitor does not scrape the secure metrics with Prometheus's token: %v", ep)
		}
		binding := one(t, objs, "ClusterRoleBinding", "-metrics-reader")
		reader := one(t, objs, "ClusterRole", "-metrics-reader")
		subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
		if str(binding, "roleRef", "name") != reader.GetName() || len(subjects) != 1 ||
			subjects[0].(map[string]any)["name"] != "prometheus" || subjects[0].(map[string]any)["namespace"] != "monitoring" {
			t.Errorf("the scraper is not bound to %s: %v", reader.GetName(), binding.Object)
		}

		// A token from a Secret instead.
		sm = one(t, render(t, "serviceMonitor.enabled=true", "serviceMonitor.tokenSecret.name=prometheus-token"), "ServiceMonitor", "-manager")
		endpoints, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		ep = endpoints[0].(map[string]any)
		if _, ok := ep["bearerTokenFile"]; ok || !reflect.DeepEqual(ep["authorization"], map[string]any{"type": "Bearer",
			"credentials": map[string]any{"name": "prometheus-token", "key": "token"}}) {
			t.Errorf("serviceMonitor.tokenSecret: endpoint %v", ep)
		}
	})

	t.Run("PodMonitors", func(t *testing.T) {
		agent := one(t, objs, "PodMonitor", "-node-agent")
		daemonSet := one(t, objs, "DaemonSet", "-node-agent")
		namespaces, _, _ := unstructured.NestedStringSlice(agent.Object, "spec", "namespaceSelector", "matchNames")
		podLabels := strMap(daemonSet.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(strMap(agent.Object, "spec", "selector", "matchLabels")).Matches(labels.Set(podLabels)) ||
			!slices.Equal(namespaces, []string{daemonSet.GetNamespace()}) {
			t.Errorf("the node agent's PodMonitor does not select its pods %v in %s: %v", podLabels, daemonSet.GetNamespace(), agent.Object["spec"])
		}
		endpoints, _, _ := unstructured.NestedSlice(agent.Object, "spec", "podMetricsEndpoints")
		if len(endpoints) != 1 || !containerPorts(t, daemonSet)[fmt.Sprint(endpoints[0].(map[string]any)["port"])] ||
			endpoints[0].(map[string]any)["scheme"] != "http" {
			t.Errorf("the node agent's PodMonitor scrapes %v, not its plain-HTTP port", endpoints)
		}
		if !strings.Contains(fmt.Sprint(endpoints[0].(map[string]any)["relabelings"]), "__meta_kubernetes_pod_node_name") {
			t.Error("the node agent's PodMonitor does not label its targets with their node")
		}

		dataplane := one(t, objs, "PodMonitor", "-dataplane")
		namespaces, _, _ = unstructured.NestedStringSlice(dataplane.Object, "spec", "namespaceSelector", "matchNames")
		if !slices.Equal(namespaces, []string{"web", "edge"}) {
			t.Errorf("the data-plane PodMonitor watches %v, not dataplane.namespaces", namespaces)
		}
		// The port the kustomize component gives the sidecar.
		sidecar := testenv.Rendered(t, "test/e2e/testdata/gateway")
		endpoints, _, _ = unstructured.NestedSlice(dataplane.Object, "spec", "podMetricsEndpoints")
		if len(endpoints) != 1 || !containerPorts(t, one(t, sidecar, "Deployment", "gateway"))[fmt.Sprint(endpoints[0].(map[string]any)["port"])] {
			t.Errorf("the data-plane PodMonitor scrapes %v, a port the sidecar does not have", endpoints)
		}
		if none := render(t, "podMonitor.enabled=true"); len(byKind(none, "PodMonitor")) != 0 {
			t.Error("PodMonitors rendered for agents the chart does not deploy")
		}
	})

	t.Run("PrometheusRule", func(t *testing.T) {
		rule := one(t, objs, "PrometheusRule", "tp-trustplane")
		if rule.GetLabels()["release"] != "prometheus" {
			t.Errorf("prometheusRule.additionalLabels not on the PrometheusRule: %v", rule.GetLabels())
		}
		spec, err := json.Marshal(rule.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		var rendered RuleGroups
		if err := json.Unmarshal(spec, &rendered); err != nil {
			t.Fatal(err)
		}
		want, err := LoadRules(root)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rendered, *want) {
			t.Errorf("the PrometheusRule's groups differ from %s", RulesFile)
		}
		raw, err := yaml.Marshal(rule.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "rendered-rules.yaml")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, promtool(t), "check", "rules", path)
	})

	t.Run("dashboard", func(t *testing.T) {
		var dashboard *unstructured.Unstructured
		for _, cm := range byKind(objs, "ConfigMap") {
			if cm.GetLabels()["grafana_dashboard"] == "1" {
				dashboard = cm
			}
		}
		if dashboard == nil {
			t.Fatal("no ConfigMap labelled grafana_dashboard: \"1\"")
		}
		want, err := os.ReadFile(filepath.Join(root, DashboardFile))
		if err != nil {
			t.Fatal(err)
		}
		var got, wantJSON any
		if err := json.Unmarshal([]byte(str(dashboard, "data", "trustplane.json")), &got); err != nil {
			t.Fatalf("the ConfigMap's trustplane.json: %v", err)
		}
		_ = json.Unmarshal(want, &wantJSON)
		if !reflect.DeepEqual(got, wantJSON) {
			t.Errorf("the ConfigMap's dashboard differs from %s", DashboardFile)
		}
		relabelled := render(t, "grafanaDashboard.enabled=true", "grafanaDashboard.labels.grafana_dashboard=null", "grafanaDashboard.labels.dashboards=trustplane",
			"grafanaDashboard.namespace=monitoring")
		cm := one(t, relabelled, "ConfigMap", "-dashboard")
		if cm.GetNamespace() != "monitoring" || cm.GetLabels()["dashboards"] != "trustplane" {
			t.Errorf("grafanaDashboard.namespace and .labels not honoured: %s %v", cm.GetNamespace(), cm.GetLabels())
		}
	})

	t.Run("accepted by the API server", func(t *testing.T) {
		ctx := context.Background()
		for _, o := range objs {
			if slices.Contains(monitoringKinds, o.GetKind()) || (o.GetKind() != "ConfigMap" && !strings.HasSuffix(o.GetName(), "-metrics") &&
				!strings.HasSuffix(o.GetName(), "-metrics-reader")) {
				continue // the Prometheus Operator's kinds are not installed here; test/install applies the rest
			}
			if ns := o.GetNamespace(); ns != "" {
				if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
					t.Fatal(err)
				}
			}
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("monitoring-test"), client.ForceOwnership, client.DryRunAll); err != nil {
				t.Errorf("%s %s/%s rejected: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	})
}
