package status

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// nested is a status shape with what statuses hold: scalars, pointers, a list, a map, and
// an object in an object.
type nested struct {
	Name   string            `json:"name,omitempty"`
	Count  int               `json:"count,omitempty"`
	Ptr    *string           `json:"ptr,omitempty"`
	List   []string          `json:"list,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Inner  *nested           `json:"inner,omitempty"`
	Always *string           `json:"always"` // no omitempty: null when nil
}

func randomNested(r *rand.Rand, depth int) nested {
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	n := nested{Name: pick("", "a", "b"), Count: r.IntN(3)}
	if r.IntN(2) == 0 {
		v := pick("x", "y")
		n.Ptr = &v
	}
	if r.IntN(2) == 0 {
		v := pick("x", "")
		n.Always = &v
	}
	for range r.IntN(3) {
		n.List = append(n.List, pick("p", "q"))
	}
	if r.IntN(2) == 0 {
		n.Labels = map[string]string{}
		for range r.IntN(3) {
			n.Labels[pick("k1", "k2", "k3")] = pick("v1", "v2")
		}
	}
	if depth > 0 && r.IntN(2) == 0 {
		inner := randomNested(r, depth-1)
		n.Inner = &inner
	}
	return n
}

// TestMergePatchTakesOneStatusToTheOther: applied to the status as it was, the patch
// mergePatch makes gives the status as it is (RFC 7386, as the API server applies it),
// and it says nothing changed exactly when the two are the same JSON; for 5,000 random
// pairs of a status with lists, maps, pointers, nulls and nested objects, and with what a
// general merge-patch diff (evanphx/json-patch, which statusMergePatch used) makes.
func TestMergePatchTakesOneStatusToTheOther(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		was, err := json.Marshal(randomNested(r, 2))
		if err != nil {
			t.Fatal(err)
		}
		is, err := json.Marshal(randomNested(r, 2))
		if err != nil {
			t.Fatal(err)
		}
		patch, changed, err := mergePatch(was, is)
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		if same := jsonEqual(t, was, is); changed == same {
			t.Fatalf("pair %d: changed %v for\n%s\n%s", i, changed, was, is)
		}
		if !changed {
			continue
		}
		applied, err := jsonpatch.MergePatch(was, patch)
		if err != nil {
			t.Fatalf("pair %d: applying %s: %v", i, patch, err)
		}
		if !jsonEqual(t, withoutNulls(t, applied), withoutNulls(t, is)) {
			t.Fatalf("pair %d: %s patched with %s is\n%s, want\n%s", i, was, patch, applied, is)
		}
		general, err := jsonpatch.CreateMergePatch(was, is)
		if err != nil {
			t.Fatal(err)
		}
		viaGeneral, err := jsonpatch.MergePatch(was, general)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, withoutNulls(t, applied), withoutNulls(t, viaGeneral)) {
			t.Fatalf("pair %d: %s gives %s with this patch, %s with the general one", i, was, applied, viaGeneral)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// withoutNulls is doc with its null members removed, at every depth: a merge patch
// stores a null as the member's absence.
func withoutNulls(t *testing.T, doc []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any) any
	strip = func(v any) any {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k, e := range m {
			if e == nil {
				delete(m, k)
			} else {
				m[k] = strip(e)
			}
		}
		return m
	}
	out, err := json.Marshal(strip(v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
