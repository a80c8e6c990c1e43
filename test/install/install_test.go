// Package install checks the install manifests: generated files are current, and what
// kustomize and Helm render is accepted by a real API server.
package install

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("TRUSTPLANE_BIN")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), "bin")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not built: run `make tools k8s-bins` (make test does it): %v", name, err)
	}
	return path
}

func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestGeneratedFilesAreCurrent fails when a marker or API type changed without
// `make manifests`: CRDs, RBAC, deepcopy code and the chart's copies of them.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := testenv.RepoRoot()
	gen := tool(t, "controller-gen")
	out := t.TempDir()
	run(t, root, gen, "crd", "rbac:roleName=trustplane-manager", "paths=./api/...", "paths=./internal/...",
		"output:crd:artifacts:config="+filepath.Join(out, "crd"), "output:rbac:artifacts:config="+filepath.Join(out, "rbac"))
	assertSameDir(t, filepath.Join(out, "crd"), filepath.Join(root, "config/crd/bases"))
	assertSameDir(t, filepath.Join(out, "crd"), filepath.Join(root, "charts/trustplane/crds"))
	assertSameFile(t, filepath.Join(out, "rbac/role.yaml"), filepath.Join(root, "config/rbac/role.yaml"))

	chartRole := run(t, root, filepath.Join(root, "hack/chart-rbac.sh"), filepath.Join(out, "rbac/role.yaml"))
	assertSameBytes(t, "charts/trustplane/templates/clusterrole.yaml", chartRole, readFile(t, filepath.Join(root, "charts/trustplane/templates/clusterrole.yaml")))

	// Deepcopy code is written beside the types, so generate it in a copy of the module.
	mod := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(mod, f))
	}
	copyTree(t, filepath.Join(root, "api"), filepath.Join(mod, "api"))
	run(t, mod, gen, "object", "paths=./api/...")
	deepcopies, _ := filepath.Glob(filepath.Join(mod, "api/*/*/zz_generated.deepcopy.go"))
	if len(deepcopies) == 0 {
		t.Fatal("controller-gen wrote no deepcopy files")
	}
	for _, p := range deepcopies {
		rel, _ := filepath.Rel(mod, p)
		assertSameBytes(t, rel, readFile(t, p), readFile(t, filepath.Join(root, rel)))
	}
}

// TestInstallManifestsAreAcceptedByTheAPIServer renders config/default with kustomize
// and the Helm chart, and applies every object with a server-side dry run.
func TestInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	root := testenv.RepoRoot()
	renders := map[string][]byte{
		"kustomize": run(t, root, tool(t, "k8s/kubectl"), "kustomize", filepath.Join(root, "config/default")),
		"helm": run(t, root, tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
			"--namespace", "trustplane-system", "--include-crds"),
		"helm-with-garden": run(t, root, tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
			"--namespace", "trustplane-system", "--include-crds", "--set", "garden.kubeconfigSecret=garden-kubeconfig", "--set", "garden.namespace=garden-kcp"),
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trustplane-system"}}
	if err := env.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for name, rendered := range renders {
		t.Run(name, func(t *testing.T) {
			objs := decodeAll(t, rendered)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GetKind()]++
				if obj.GetKind() == "Namespace" {
					continue // created above for real; namespaced objects need it to exist
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
					client.FieldOwner("install-test"), client.ForceOwnership, client.DryRunAll)
				if err != nil {
					t.Errorf("%s %s/%s rejected: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
				if obj.GetKind() == "Deployment" {
					assertHardened(t, obj)
					assertGarden(t, obj, name == "helm-with-garden")
				}
			}
			for _, kind := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment", "Service"} {
				if kinds[kind] == 0 {
					t.Errorf("render has no %s (kinds: %v)", kind, kinds)
				}
			}
		})
	}
}

// assertGarden checks the garden kubeconfig is mounted read-only and passed on exactly
// when the chart is given one.
func assertGarden(t *testing.T, obj *unstructured.Unstructured, configured bool) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	hasFlags := strings.Contains(args, "--garden-kubeconfig=/etc/trustplane/garden/kubeconfig") && strings.Contains(args, "--garden-namespace=garden-kcp")
	mounted := len(c.VolumeMounts) == 1 && c.VolumeMounts[0].MountPath == "/etc/trustplane/garden" && c.VolumeMounts[0].ReadOnly &&
		len(d.Spec.Template.Spec.Volumes) == 1 && d.Spec.Template.Spec.Volumes[0].Secret != nil && d.Spec.Template.Spec.Volumes[0].Secret.SecretName == "garden-kubeconfig"
	if configured != hasFlags || configured != mounted {
		t.Errorf("garden configured=%v, but flags=%v mounted=%v (args %q)", configured, hasFlags, mounted, args)
	}
}

// assertHardened checks the manager Deployment is what a restricted namespace admits.
func assertHardened(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod does not set runAsNonRoot")
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: root filesystem is writable", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s allows privilege escalation", c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no resource requests", c.Name)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("container %s lacks probes", c.Name)
		}
	}
}

func decodeAll(t *testing.T, rendered []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func assertSameDir(t *testing.T, want, got string) {
	t.Helper()
	wantFiles, _ := filepath.Glob(filepath.Join(want, "*.yaml"))
	gotFiles, _ := filepath.Glob(filepath.Join(got, "*.yaml"))
	if len(wantFiles) != len(gotFiles) {
		t.Errorf("%s has %d files, generator makes %d: run `make manifests`", got, len(gotFiles), len(wantFiles))
	}
	for _, w := range wantFiles {
		assertSameFile(t, w, filepath.Join(got, filepath.Base(w)))
	}
}

func assertSameFile(t *testing.T, want, got string) {
	t.Helper()
	assertSameBytes(t, got, readFile(t, want), readFile(t, got))
}

func assertSameBytes(t *testing.T, name string, want, got []byte) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale: run `make manifests`", name)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, readFile(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		copyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
