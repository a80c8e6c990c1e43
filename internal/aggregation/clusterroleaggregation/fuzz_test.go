package clusterroleaggregation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzClusterRoleSelectors: whatever a ClusterRole's author writes in
// aggregationRule.clusterRoleSelectors (operators and values are checked only when the
// selector is read), the controller's reading of it is refused, or is one selector whose
// canonical form parses back and matches the same label sets.
func FuzzClusterRoleSelectors(f *testing.F) {
	f.Add("rbac.example.com/aggregate-to-admin", "true", "team", "In", "a,b", "x")
	f.Add("", "", "k", "Exists", "", "")
	f.Add("k", "v", "k", "NotIn", "", "k")
	f.Add("a/b/c", "v", "k", "Bogus", "v", "")
	f.Fuzz(func(t *testing.T, matchKey, matchValue, exprKey, op, value, other string) {
		in := []metav1.LabelSelector{{
			MatchLabels:      map[string]string{matchKey: matchValue},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: exprKey, Operator: metav1.LabelSelectorOperator(op), Values: splitValues(value)}},
		}}
		selectors, err := parseSelectors(in)
		if err != nil {
			return
		}
		if len(selectors) != 1 {
			t.Fatalf("%d selectors for one", len(selectors))
		}
		again, err := labels.Parse(selectors[0].String())
		if err != nil {
			t.Fatalf("the canonical form %q does not parse: %v", selectors[0].String(), err)
		}
		for _, set := range []labels.Set{{matchKey: matchValue}, {matchKey: matchValue, exprKey: value}, {exprKey: other}, {}, {matchKey: matchValue, exprKey: other}} {
			if selectors[0].Matches(set) != again.Matches(set) {
				t.Fatalf("%q and its canonical form disagree on %v", selectors[0].String(), set)
			}
		}
	})
}

func splitValues(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
