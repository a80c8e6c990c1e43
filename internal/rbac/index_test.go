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
	idx.Set(types.NamespacedName{Name: "admin"}, []labels.Selector{sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-admin": "true"}})})
	idx.Set(types.NamespacedName{Name: "all"}, []labels.Selector{sel(t, metav1.LabelSelector{})})
	idx.Set(types.NamespacedName{Name: "view"}, []labels.Selector{
		sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-view": "true"}}),
		sel(t, metav1.LabelSelector{MatchLabels: map[string]string{"agg-admin": "true"}}),
	})
	idx.Set(types.NamespacedName{Namespace: "team", Name: "ns-agg"}, []labels.Selector{sel(t, metav1.LabelSelector{})})

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
