// Package e2e runs trustplane as users run it: the binary built from ./cmd/trustplane, one
// child process per subcommand, started with the args of the rendered manifests (the
// manager's Deployment, the node agent's DaemonSet, the data-plane sidecar a gateway gets
// from the kustomize component) and authenticated with a token of the ServiceAccount those
// manifests grant — never as admin — against a real API server. What a pod's environment
// supplies is passed explicitly: the downward-API values, loopback ports, a kubeconfig with
// the ServiceAccount's token, and the namespace the manager would read from its token mount.
package e2e

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// rendered is what `kubectl kustomize dir` renders, decoded.
func rendered(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl := filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl")
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return testenv.DecodeYAML(t, out)
}

// install applies a rendered tree to the API server for real (server-side apply, the way
// `kubectl apply --server-side -k` does), CRDs apart: the test environment installed them.
// Without a kubelet, the Deployments and DaemonSets run nothing; the tests run their
// commands instead.
func install(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, namespaces := range []bool{true, false} { // namespaces first
		for _, obj := range objs {
			if obj.GetKind() == "CustomResourceDefinition" || namespaces != (obj.GetKind() == "Namespace") {
				continue
			}
			apply := client.ApplyConfigurationFromUnstructured(obj.DeepCopy())
			if err := env.Client.Apply(ctx, apply, client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
}

// podSpecOf finds the workload kind/name in objs and returns its pod template.
func podSpecOf(t *testing.T, objs []*unstructured.Unstructured, kind, name string) corev1.PodSpec {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != kind || obj.GetName() != name {
			continue
		}
		var template corev1.PodTemplateSpec
		switch kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			fromUnstructured(t, obj, d)
			template = d.Spec.Template
		case "DaemonSet":
			d := &appsv1.DaemonSet{}
			fromUnstructured(t, obj, d)
			template = d.Spec.Template
		default:
			t.Fatalf("no pod template in a %s", kind)
		}
		return template.Spec
	}
	t.Fatalf("the render has no %s %s", kind, name)
	return corev1.PodSpec{}
}

func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatal(err)
	}
}

// argsOf is the container's args as the kubelet passes them: $(VAR) references expanded
// from the container's downward-API env, whose values the test supplies in fieldValues
// (by fieldPath, e.g. "spec.nodeName"). Overrides follow: for a flag given twice the last
// value wins, so they replace what only a pod's environment can provide.
func argsOf(t *testing.T, c corev1.Container, fieldValues map[string]string, overrides ...string) []string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, ok := fieldValues[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("container %s: no test value for the downward-API field %s", c.Name, e.ValueFrom.FieldRef.FieldPath)
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
			t.Fatalf("container %s: arg %q refers to a variable the pod does not define", c.Name, a)
		}
		args = append(args, a)
	}
	return append(args, overrides...)
}

// container is the named container (or native sidecar) of a pod spec.
func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func urlOf(addr, path string) string { return fmt.Sprintf("http://%s%s", addr, path) }
