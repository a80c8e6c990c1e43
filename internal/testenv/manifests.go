package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
)

// Rendered is what `kubectl kustomize dir` renders (dir relative to the repository root),
// decoded.
func Rendered(tb testing.TB, dir string) []*unstructured.Unstructured {
	tb.Helper()
	// Through Tool: $TRUSTPLANE_BIN when set (a worktree borrows another's bin/).
	cmd := exec.Command(Tool(tb, "k8s/kubectl"), "kustomize", filepath.Join(RepoRoot(), dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return DecodeYAML(tb, out)
}

// Install applies a rendered tree to the API server for real (server-side apply, the way
// `kubectl apply --server-side -k` does), CRDs apart: the test environment installed them.
// Without a kubelet, the Deployments and DaemonSets run nothing; tests run their commands
// instead.
func (e *Env) Install(tb testing.TB, objs []*unstructured.Unstructured) {
	tb.Helper()
	for _, namespaces := range []bool{true, false} { // namespaces first
		for _, obj := range objs {
			if obj.GetKind() == "CustomResourceDefinition" || namespaces != (obj.GetKind() == "Namespace") {
				continue
			}
			apply := client.ApplyConfigurationFromUnstructured(obj.DeepCopy())
			if err := e.Client.Apply(context.Background(), apply, client.FieldOwner("install"), client.ForceOwnership); err != nil {
				tb.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
	// As a real install, which creates no KubeconfigRequest before the API server applies
	// the policy that mutates them (config.WaitForKubeconfigAdmission).
	for _, obj := range objs {
		if obj.GetKind() == "MutatingAdmissionPolicy" && obj.GetName() == "trustplane-kubeconfig-requests" {
			if err := config.WaitForKubeconfigAdmission(context.Background(), e.Client, "default", true); err != nil {
				tb.Fatalf("waiting for the admission policy %s: %v", obj.GetName(), err)
			}
		}
	}
}

// PodSpecOf finds the workload kind/name in objs and returns its pod template's spec.
func PodSpecOf(tb testing.TB, objs []*unstructured.Unstructured, kind, name string) corev1.PodSpec {
	tb.Helper()
	for _, obj := range objs {
		if obj.GetKind() != kind || obj.GetName() != name {
			continue
		}
		switch kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			FromUnstructured(tb, obj, d)
			return d.Spec.Template.Spec
		case "DaemonSet":
			d := &appsv1.DaemonSet{}
			FromUnstructured(tb, obj, d)
			return d.Spec.Template.Spec
		default:
			tb.Fatalf("no pod template in a %s", kind)
		}
	}
	tb.Fatalf("the render has no %s %s", kind, name)
	return corev1.PodSpec{}
}

// FromUnstructured converts obj into the typed value into.
func FromUnstructured(tb testing.TB, obj *unstructured.Unstructured, into any) {
	tb.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		tb.Fatal(err)
	}
}

// ArgsOf is the container's args as the kubelet passes them: $(VAR) references expanded
// from the container's downward-API env, whose values the test supplies in fieldValues
// (by fieldPath, e.g. "spec.nodeName"). Overrides follow: for a flag given twice the last
// value wins, so they replace what only a pod's environment can provide.
func ArgsOf(tb testing.TB, c corev1.Container, fieldValues map[string]string, overrides ...string) []string {
	tb.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, ok := fieldValues[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				tb.Fatalf("container %s: no test value for the downward-API field %s", c.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vars[e.Name] = v
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		}
	}
	args := make([]string, 0, len(c.Args)+len(overrides))
	for _, a := range c.Args {
		for name, v := range vars {
			a = strings.ReplaceAll(a, "$("+name+")", v)
		}
		if strings.Contains(a, "$(") {
			tb.Fatalf("container %s: arg %q refers to a variable the pod does not define", c.Name, a)
		}
		args = append(args, a)
	}
	return append(args, overrides...)
}

// ContainerOf is the named container (or native sidecar) of a pod spec.
func ContainerOf(tb testing.TB, pod corev1.PodSpec, name string) corev1.Container {
	tb.Helper()
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if c.Name == name {
			return c
		}
	}
	tb.Fatalf("no container %s", name)
	return corev1.Container{}
}

// Tool is the path of a tool make builds into bin/ (or $TRUSTPLANE_BIN): "helm",
// "k8s/kubectl", ... A test that needs one fails, saying how to build it, when it is not
// there.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("TRUSTPLANE_BIN")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("%s not built: run `make tools k8s-bins` (make test does it): %v", name, err)
	}
	return path
}
