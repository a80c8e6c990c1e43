package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The aggregation oracle is kube-controller-manager's own ClusterRole aggregation
// controller (k8s.io/kubernetes/pkg/controller/clusterroleaggregation v1.37.1), run by
// test/k8speers/cmd/aggregationoracle: a process of its own, because trustplane's module
// does not require k8s.io/kubernetes. It reads ClusterRoles and prints, for each one with
// an aggregationRule, the rules upstream's sync applies to it given those roles. Nothing
// of trustplane's (internal/aggregation/rbac) is on this path.

// oracleResult is one line of the oracle's answer.
type oracleResult struct {
	Name  string              `json:"name"`
	Rules []rbacv1.PolicyRule `json:"rules"`
	Error string              `json:"error,omitempty"`
}

var (
	oracleOnce sync.Once
	oraclePath string
	oracleErr  error
)

// aggregationOracle builds the oracle into bin/k8speers (or $TRUSTPLANE_BIN/k8speers) as
// make aggregation-oracle does, through hack/build-cached.sh (nothing to do while its
// recipe is unchanged: the Go version, test/k8speers' go.mod and go.sum, its cmd/
// sources), and returns its path.
func aggregationOracle() (string, error) {
	oracleOnce.Do(func() {
		root := testenv.RepoRoot()
		bin := os.Getenv("TRUSTPLANE_BIN")
		if bin == "" {
			bin = filepath.Join(root, "bin")
		}
		out := filepath.Join(bin, "k8speers")
		cmd := exec.Command(filepath.Join(root, "hack", "build-cached.sh"), "test/k8speers", out, "./cmd/aggregationoracle")
		cmd.Dir = root
		if output, err := cmd.CombinedOutput(); err != nil {
			oracleErr = fmt.Errorf("building the aggregation oracle (make aggregation-oracle): %w\n%s", err, output)
			return
		}
		oraclePath = filepath.Join(out, "aggregationoracle")
	})
	return oraclePath, oracleErr
}

// runOracle asks the oracle at path what kube-controller-manager applies to each
// aggregating role of roles, by name.
func runOracle(ctx context.Context, path string, roles []rbacv1.ClusterRole) (map[string]oracleResult, error) {
	// Only what the controller reads: names, labels, aggregation rules and rules.
	in := make([]rbacv1.ClusterRole, 0, len(roles))
	for _, r := range roles {
		in = append(in, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Labels: r.Labels}, AggregationRule: r.AggregationRule, Rules: r.Rules})
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var results []oracleResult
	if err := json.Unmarshal(out, &results); err != nil {
		return nil, fmt.Errorf("%s answered %.200q: %w", path, out, err)
	}
	byName := make(map[string]oracleResult, len(results))
	for _, r := range results {
		byName[r.Name] = r
	}
	return byName, nil
}

// rolesAsClusterRoles turns the namespaced Roles of trustplane's Role aggregation into the
// ClusterRoles the oracle takes: the annotation's selector (kubectl syntax) becomes a
// one-selector aggregationRule, the Role aggregation's stated semantics being the
// ClusterRole merge's. A selector that does not convert is returned by Role name.
func rolesAsClusterRoles(roles []rbacv1.Role) ([]rbacv1.ClusterRole, map[string]error) {
	out := make([]rbacv1.ClusterRole, 0, len(roles))
	bad := map[string]error{}
	for _, r := range roles {
		cr := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Labels: r.Labels}, Rules: r.Rules}
		if raw, ok := r.Annotations[roleaggregation.SelectorAnnotation]; ok {
			// A Role whose selector does not convert stays a source (as for trustplane's
			// controller, whose sync of it fails) and is reported.
			if sel, err := metav1.ParseToLabelSelector(raw); err != nil {
				bad[r.Name] = err
			} else {
				cr.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{*sel}}
			}
		}
		out = append(out, cr)
	}
	return out, bad
}

// aggregationDiffs compares every aggregating role of roles with what the oracle says
// kube-controller-manager applies to it, and describes each that differs, naming it
// (describe gives "ClusterRole admin" or "Role ns/name"), sorted; none when all agree.
//
// The comparison is upstream's own: syncClusterRole
// (k8s.io/kubernetes/pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go,
// v1.37.1) writes unless equality.Semantic.DeepEqual(newPolicyRules, sharedClusterRole.Rules),
// so the rules must be the same list in the same order (upstream builds it selector by
// selector, sources sorted by name, each rule once: a role holding the same rules in
// another order, or one twice, is one kube-controller-manager would rewrite), and inside
// a rule the lists in the same order, a nil list equal to an empty one.
func aggregationDiffs(roles []rbacv1.ClusterRole, oracle map[string]oracleResult, describe func(rbacv1.ClusterRole) string) []string {
	var diffs []string
	for _, r := range roles {
		if r.AggregationRule == nil {
			continue
		}
		want, ok := oracle[r.Name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: the oracle did not answer for it", describe(r)))
		case want.Error != "":
			diffs = append(diffs, fmt.Sprintf("%s: kube-controller-manager's sync of it fails: %s", describe(r), want.Error))
		case !apiequality.Semantic.DeepEqual(want.Rules, r.Rules):
			diffs = append(diffs, fmt.Sprintf("%s: rules %v, kube-controller-manager applies %v (%s)", describe(r), r.Rules, want.Rules, ruleDifference(r.Rules, want.Rules)))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// ruleDifference says how have differs from want: rules missing, rules upstream would
// not write, or the same rules in another order or repeated.
func ruleDifference(have, want []rbacv1.PolicyRule) string {
	var parts []string
	if missing := rulesNotIn(want, have); len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing %v", missing))
	}
	if extra := rulesNotIn(have, want); len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("not upstream's %v", extra))
	}
	if len(parts) == 0 {
		return "the same rules in another order or repeated"
	}
	return strings.Join(parts, "; ")
}

// rulesNotIn are the rules of a that b does not hold (equality.Semantic, as upstream's
// ruleExists).
func rulesNotIn(a, b []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range a {
		if !slices.ContainsFunc(b, func(o rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(r, o) }) {
			out = append(out, r)
		}
	}
	return out
}

// settleAggregated is a settle check: the aggregating roles that world lists hold what
// the oracle at oracle says kube-controller-manager applies, within the settle deadline;
// when they never do, each role still differing is a violation of invariant naming it.
// world returns the roles as the oracle takes them, how to name one in a violation, and
// the differences found before the oracle is asked (selectors that do not convert).
func settleAggregated(ctx context.Context, h *Harness, invariant, oracle string,
	world func(ctx context.Context) ([]rbacv1.ClusterRole, func(rbacv1.ClusterRole) string, []string, error)) {
	var diffs []string
	compared := 0
	if h.Eventually(ctx, invariant, func(ctx context.Context) bool {
		roles, describe, early, err := world(ctx)
		if err != nil {
			diffs = []string{"listing: " + err.Error()}
			return false
		}
		want, err := runOracle(ctx, oracle, roles)
		if err != nil {
			diffs = []string{"the oracle: " + err.Error()}
			return false
		}
		diffs = append(early, aggregationDiffs(roles, want, describe)...)
		compared = len(want)
		return len(diffs) == 0
	}) {
		h.Logf("%s: %d aggregating roles hold what kube-controller-manager's controller applies", invariant, compared)
		return
	}
	for _, d := range diffs {
		h.Check(invariant, false, "%s", d)
	}
}
