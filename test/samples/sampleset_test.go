package samples

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testenv"
)

// sampleSet is every object of config/samples as written, so that the checks expect what
// the samples say rather than a copy of it.
type sampleSet struct {
	objects []*unstructured.Unstructured
}

func loadSamples(t *testing.T) *sampleSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := &sampleSet{}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := dec.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) > 0 {
				s.objects = append(s.objects, obj)
			}
		}
		_ = f.Close()
	}
	return s
}

// ofKind returns the samples of a kind (in any API group).
func (s *sampleSet) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed returns the samples of a kind converted to T.
func typed[T any](t *testing.T, s *sampleSet, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range s.ofKind(kind) {
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
			t.Fatalf("sample %s %s: %v", kind, o.GetName(), err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatalf("config/samples has no %s", kind)
	}
	return out
}

// live reads the cluster's copy of a sample.
func live(t *testing.T, sample *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(sample.GroupVersionKind())
	err := cluster.Get(context.Background(), client.ObjectKeyFromObject(sample), obj)
	return obj, err == nil
}

// waitReady waits until every sample of kind has the condition Ready=True, and returns
// their live copies.
func waitReady(t *testing.T, s *sampleSet, kind string) []*unstructured.Unstructured {
	t.Helper()
	samples := s.ofKind(kind)
	if len(samples) == 0 {
		t.Fatalf("config/samples has no %s", kind)
	}
	var out []*unstructured.Unstructured
	for _, sample := range samples {
		var obj *unstructured.Unstructured
		testenv.Eventually(t, kind+" "+sample.GetName()+" Ready=True", readyTimeout, func() bool {
			var ok bool
			obj, ok = live(t, sample)
			return ok && conditionTrue(obj, "Ready")
		})
		out = append(out, obj)
	}
	return out
}

// conditionReason is the reason of obj's condition of that type ("" without one).
func conditionReason(obj *unstructured.Unstructured, conditionType string) string {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType {
			reason, _ := m["reason"].(string)
			return reason
		}
	}
	return ""
}

func conditionTrue(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == conditionType {
			return m["status"] == "True"
		}
	}
	return false
}

// eventually is testenv.Eventually with the samples' timeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, readyTimeout, cond)
}
