package rbac

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

func sel(t *testing.T, ls metav1.LabelSelector) labels.Selector {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIndexAffected(t *testing.T) {
	idx := NewIndex()
	idx.Set(types.NamespacedName{Name: "admin"}, []labels.Selector{sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-admin": "true"}})}, nil)
	idx.Set(types.NamespacedName{Name: "all"}, []labels.Selector{sel(t, metav1.LabelSelector{})}, nil)
	idx.Set(types.NamespacedName{Name: "view"}, []labels.Selector{
		sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-view": "true"}}),
		sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-admin": "true"}}),
	}, nil)
	idx.Set(types.NamespacedName{Namespace: "team", Name: "ns-agg"}, []labels.Selector{sel(t, metav1.LabelSelector{})}, nil)

	names := func(keys []types.NamespacedName) []string {
		var out []string
		for _, k := range keys {
			out = append(out, k.Name)
		}
		return out
	}
	for _, tc := range []struct {
		old, new map[string]string
		want     string
	}{
		{old: nil, new: map[string]string{"agg-view": "true"}, want: "[all view]"},
		{old: map[string]string{"agg-admin": "true"}, new: map[string]string{}, want: "[admin all view]"},
		{old: map[string]string{"x": "y"}, new: map[string]string{"x": "z"}, want: "[all]"},
	} {
		if got := names(idx.Affected("", tc.old, tc.new)); fmtList(got) != tc.want {
			t.Errorf("Affected(%v → %v) = %v, want %s", tc.old, tc.new, got, tc.want)
		}
	}
	if got := names(idx.Affected("team", map[string]string{})); fmtList(got) != "[ns-agg]" {
		t.Errorf("namespaced: %v", got)
	}
	idx.Delete(types.NamespacedName{Name: "all"})
	if got := names(idx.Affected("", map[string]string{"x": "y"})); len(got) != 0 || idx.Len() != 3 {
		t.Errorf("after delete: %v (len %d)", got, idx.Len())
	}
}

// TestIndexInputs: an aggregator's inputs are the other aggregators its selectors match,
// and theirs in turn (as Kubernetes' admin reads edit, which reads view), in its
// namespace, never itself, through cycles too.
func TestIndexInputs(t *testing.T) {
	idx := NewIndex()
	aggregateTo := func(role string) labels.Selector {
		return sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"aggregate-to-" + role: "true"}})
	}
	idx.Set(types.NamespacedName{Name: "admin"}, []labels.Selector{aggregateTo("admin")}, nil)
	idx.Set(types.NamespacedName{Name: "edit"}, []labels.Selector{aggregateTo("edit")}, map[string]string{"aggregate-to-admin": "true"})
	idx.Set(types.NamespacedName{Name: "view"}, []labels.Selector{aggregateTo("view")}, map[string]string{"aggregate-to-edit": "true", "aggregate-to-view": "true"})
	idx.Set(types.NamespacedName{Namespace: "team", Name: "team-edit"}, []labels.Selector{aggregateTo("edit")}, nil)
	idx.Set(types.NamespacedName{Name: "ring-a"}, []labels.Selector{aggregateTo("ring-a")}, map[string]string{"aggregate-to-ring-b": "true"})
	idx.Set(types.NamespacedName{Name: "ring-b"}, []labels.Selector{aggregateTo("ring-b")}, map[string]string{"aggregate-to-ring-a": "true"})
	for name, want := range map[string]string{"admin": "[edit view]", "edit": "[view]", "view": "[]", "absent": "[]", "ring-a": "[ring-b]"} {
		if got := fmtList(idx.Inputs(types.NamespacedName{Name: name})); got != want {
			t.Errorf("Inputs(%s) = %s, want %s", name, got, want)
		}
	}
}

func fmtList(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}
