// Package sidebyside runs trustplane's clusterrole-aggregation controller side by side with
// kube-controller-manager's (v1.37.1, built from source into bin/k8s), each against its own
// real API server, feeds both the same seeded corpus of ClusterRoles and churn, and
// compares the results object by object. The side-by-side test and `make bench-aggregation`
// share it.
package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/testenv"
)

// Side is one API server with one aggregation controller running against it.
type Side struct {
	Name   string
	Env    *testenv.Env
	Client client.Client
	proc   *exec.Cmd
}

// StartSide starts an API server and the controller command built by args(kubeconfig).
func StartSide(name, dir string, args func(kubeconfig string) []string) (*Side, error) {
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Environment().KubeConfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	argv := args(kubeconfig)
	cmd := exec.Command(argv[0], argv[1:]...)
	logs, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	if err := cmd.Start(); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &Side{Name: name, Env: env, Client: env.Client, proc: cmd}, nil
}

// KubeControllerManager runs upstream's controller alone.
func KubeControllerManager(binDir string) func(string) []string {
	return func(kubeconfig string) []string {
		return []string{filepath.Join(binDir, "kube-controller-manager"), "--controllers=clusterrole-aggregation",
			"--leader-elect=false", "--secure-port=0", "--kubeconfig=" + kubeconfig}
	}
}

// Trustplane runs `trustplane manager` with only the clusterrole-aggregation controller.
func Trustplane(binary string) func(string) []string {
	return func(kubeconfig string) []string {
		return []string{binary, "manager", "--controllers=clusterrole-aggregation", "--kubeconfig=" + kubeconfig,
			"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	}
}

// CPUSeconds is the user+system CPU time the controller process has used so far.
func (s *Side) CPUSeconds() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.proc.Process.Pid))
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// PID is the controller process's.
func (s *Side) PID() int { return s.proc.Process.Pid }

// Stop stops the controller and the API server.
func (s *Side) Stop() {
	_ = s.proc.Process.Signal(syscall.SIGTERM)
	_ = s.proc.Wait()
	_ = s.Env.Stop()
}

// Corpus is a seeded world of ClusterRoles: sources, first-level aggregators selecting
// sources, second-level aggregators selecting first-level ones, and a top aggregator that
// selects everything (but other tops) and that nothing selects. Selection is acyclic, so
// the result is unique.
type Corpus struct {
	// EmptyTop gives the top aggregator an empty selector ({}: every ClusterRole). Only one
	// corpus per cluster may: two such aggregators select each other, and a cycle has no
	// unique result (rules can circulate forever), upstream's or ours.
	EmptyTop bool

	r          *rand.Rand
	prefix     string
	sources    []string
	level1     []string
	level2     []string
	nextSource int
}

var (
	teams = []string{"a", "b", "c", "d"}
	kinds = []string{"read", "write", "admin"}
	envs  = []string{"x", "y"}
)

// NewCorpus makes a corpus; prefix keeps its names apart from the bootstrap roles.
func NewCorpus(seed int64, prefix string) *Corpus {
	return &Corpus{r: rand.New(rand.NewSource(seed)), prefix: prefix}
}

// Op is one change: create, a merge patch, or delete.
type Op struct {
	Name   string
	Create *rbacv1.ClusterRole
	Patch  map[string]any
	Delete bool
}

// Initial returns the ops that create the corpus.
func (c *Corpus) Initial(sources, aggregators int) []Op {
	var ops []Op
	for range sources {
		ops = append(ops, c.newSource())
	}
	n1 := max(1, aggregators*3/4)
	for i := range n1 {
		name := fmt.Sprintf("%sagg1-%03d", c.prefix, i)
		c.level1 = append(c.level1, name)
		ops = append(ops, Op{Name: name, Create: &rbacv1.ClusterRole{
			ObjectMeta:      metav1.ObjectMeta{Name: name, Labels: map[string]string{"level": "1", "team": c.pick(teams)}},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: c.selectors("src")},
		}})
	}
	for i := range max(1, aggregators-n1-1) {
		name := fmt.Sprintf("%sagg2-%03d", c.prefix, i)
		c.level2 = append(c.level2, name)
		ops = append(ops, Op{Name: name, Create: &rbacv1.ClusterRole{
			ObjectMeta:      metav1.ObjectMeta{Name: name, Labels: map[string]string{"level": "2"}},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: c.selectors("level")},
		}})
	}
	top := c.prefix + "top"
	topSelector := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "top", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	if c.EmptyTop {
		topSelector = metav1.LabelSelector{}
	}
	ops = append(ops, Op{Name: top, Create: &rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{Name: top, Labels: map[string]string{"top": "true"}},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{topSelector}},
	}})
	return ops
}

// Churn returns n random changes: label flips, rule edits, deletes and creates of
// sources, and label and selector changes of aggregators.
func (c *Corpus) Churn(n int) []Op {
	var ops []Op
	for len(ops) < n {
		switch k := c.r.Intn(100); {
		case k < 30 && len(c.sources) > 0:
			ops = append(ops, Op{Name: c.pick(c.sources), Patch: map[string]any{"metadata": map[string]any{"labels": c.sourceLabels()}}})
		case k < 55 && len(c.sources) > 0:
			ops = append(ops, Op{Name: c.pick(c.sources), Patch: map[string]any{"rules": c.rules()}})
		case k < 65 && len(c.sources) > 1:
			i := c.r.Intn(len(c.sources))
			ops = append(ops, Op{Name: c.sources[i], Delete: true})
			c.sources = append(c.sources[:i], c.sources[i+1:]...)
		case k < 75:
			ops = append(ops, c.newSource())
		case k < 85:
			ops = append(ops, Op{Name: c.pick(c.level1), Patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": c.pick(teams)}}}})
		case k < 95:
			ops = append(ops, Op{Name: c.pick(c.level1), Patch: map[string]any{"aggregationRule": map[string]any{"clusterRoleSelectors": c.selectors("src")}}})
		default:
			ops = append(ops, Op{Name: c.pick(c.level2), Patch: map[string]any{"aggregationRule": map[string]any{"clusterRoleSelectors": c.selectors("level")}}})
		}
	}
	return ops
}

func (c *Corpus) newSource() Op {
	name := fmt.Sprintf("%ssrc-%05d", c.prefix, c.nextSource)
	c.nextSource++
	c.sources = append(c.sources, name)
	labels := map[string]string{}
	for k, v := range c.sourceLabels() {
		if v != nil {
			labels[k] = v.(string)
		}
	}
	return Op{Name: name, Create: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: c.rules()}}
}

func (c *Corpus) pick(from []string) string { return from[c.r.Intn(len(from))] }

// sourceLabels always carries src=true; every other key may be absent. A merge patch
// with null removes a label.
func (c *Corpus) sourceLabels() map[string]any {
	l := map[string]any{"src": "true"}
	for _, kv := range []struct {
		key    string
		values []string
	}{{"team", teams}, {"kind", kinds}, {"env", envs}} { // fixed order: the seed decides everything
		if c.r.Intn(3) > 0 {
			l[kv.key] = c.pick(kv.values)
		} else {
			l[kv.key] = nil
		}
	}
	return l
}

// selectors makes 1–3 selectors, each requiring the scope label (src or level=1) so
// that selection stays acyclic, plus a random requirement.
func (c *Corpus) selectors(scope string) []metav1.LabelSelector {
	var out []metav1.LabelSelector
	for range 1 + c.r.Intn(3) {
		s := metav1.LabelSelector{MatchLabels: map[string]string{}}
		if scope == "src" {
			s.MatchLabels["src"] = "true"
		} else {
			s.MatchLabels["level"] = "1"
		}
		switch c.r.Intn(5) {
		case 0:
			s.MatchLabels["team"] = c.pick(teams)
		case 1:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{c.pick(teams), c.pick(teams)}}}
		case 2:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "kind", Operator: metav1.LabelSelectorOpNotIn, Values: []string{c.pick(kinds)}}}
		case 3:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}
		}
		out = append(out, s)
	}
	return out
}

// rules draws 0–4 rules from a small pool, so roles share rules and dedup matters.
func (c *Corpus) rules() []rbacv1.PolicyRule {
	verbs := [][]string{{"get"}, {"list"}, {"get", "list", "watch"}, {"*"}, {"create", "delete"}}
	resources := [][]string{{"pods"}, {"secrets"}, {"deployments"}, {"pods", "pods/log"}, {"configmaps"}}
	groups := [][]string{{""}, {"apps"}, {"", "apps"}}
	out := []rbacv1.PolicyRule{}
	for range c.r.Intn(5) {
		if c.r.Intn(10) == 0 {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz"}[c.r.Intn(2):]})
			continue
		}
		out = append(out, rbacv1.PolicyRule{Verbs: verbs[c.r.Intn(len(verbs))], APIGroups: groups[c.r.Intn(len(groups))], Resources: resources[c.r.Intn(len(resources))]})
	}
	return out
}

// Apply performs an op against one API server. A patch or delete of an object that is
// already gone is not an error.
func Apply(ctx context.Context, cl client.Client, op Op) error {
	switch {
	case op.Create != nil:
		return cl.Create(ctx, op.Create.DeepCopy())
	case op.Delete:
		return client.IgnoreNotFound(cl.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: op.Name}}))
	default:
		raw, err := json.Marshal(op.Patch)
		if err != nil {
			return err
		}
		err = cl.Patch(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: op.Name}}, client.RawPatch(types.MergePatchType, raw))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
}

// Snapshot maps every ClusterRole to the JSON of its rules (byte-level comparison).
func Snapshot(ctx context.Context, cl client.Client) (map[string]string, error) {
	list := &rbacv1.ClusterRoleList{}
	if err := cl.List(ctx, list); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Items))
	for _, r := range list.Items {
		raw, _ := json.Marshal(r.Rules)
		out[r.Name] = string(raw)
	}
	return out, nil
}

// Unconverged lists the aggregators whose rules are not what aggregation of the current
// state gives: empty once the controller has nothing left to do.
func Unconverged(ctx context.Context, cl client.Client) ([]string, error) {
	list := &rbacv1.ClusterRoleList{}
	if err := cl.List(ctx, list); err != nil {
		return nil, err
	}
	sources := make([]rbac.Source, len(list.Items))
	for i, r := range list.Items {
		sources[i] = rbac.Source{Name: r.Name, Labels: r.Labels, Rules: r.Rules}
	}
	var out []string
	for _, r := range list.Items {
		if r.AggregationRule == nil {
			continue
		}
		var selectors []labels.Selector
		for i := range r.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i])
			if err != nil {
				return nil, err
			}
			selectors = append(selectors, s)
		}
		if !rbac.RulesEqual(rbac.Aggregate(r.Name, selectors, sources), r.Rules) {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// WaitConverged polls until the side has nothing left to aggregate; it returns when.
func WaitConverged(ctx context.Context, cl client.Client, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		pending, err := Unconverged(ctx, cl)
		if err == nil && len(pending) == 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not converged after %v: %d aggregators pending (%v), last error %w", timeout, len(pending), Head(pending), err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Head is the first five of s: enough of a long list for a message.
func Head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// Diff compares two snapshots object by object.
func Diff(a, b map[string]string) []string {
	var out []string
	for name, rules := range a {
		if other, ok := b[name]; !ok {
			out = append(out, name+": only on the first side")
		} else if other != rules {
			out = append(out, fmt.Sprintf("%s:\n  %s\n  %s", name, rules, other))
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out = append(out, name+": only on the second side")
		}
	}
	sort.Strings(out)
	return out
}
