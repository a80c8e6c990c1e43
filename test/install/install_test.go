// Package install checks the install manifests: generated files are current, and what
// kustomize and Helm render is accepted by a real API server.
package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

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
	gen := testenv.Tool(t, "controller-gen")
	out := t.TempDir()
	run(t, root, gen, "crd", "paths=./api/...", "output:crd:artifacts:config="+filepath.Join(out, "crd"))
	crds, err := filepath.Glob(filepath.Join(out, "crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("controller-gen wrote no CRD (%v)", err)
	}
	run(t, root, "go", append([]string{"run", "./hack/crddescriptions"}, crds...)...) // as make manifests does
	assertSameDir(t, filepath.Join(out, "crd"), filepath.Join(root, "config/crd/bases"))
	assertSameDir(t, filepath.Join(out, "crd"), filepath.Join(root, "charts/trustplane/crds"))

	// Each process's RBAC from its own markers: the manager, the node agent, the data plane.
	run(t, root, filepath.Join(root, "hack/gen-rbac.sh"), gen, out)
	for _, f := range []string{"config/rbac/role.yaml", "config/node-agent/role.yaml", "config/components/dataplane-sidecar/role.yaml",
		"charts/trustplane/files/node-agent-role.yaml", "charts/trustplane/files/dataplane-role.yaml", "charts/trustplane/files/role-aggregation-policy.yaml",
		"charts/trustplane/files/node-agent-policy.yaml", "charts/trustplane/files/status-writers-policy.yaml",
		"charts/trustplane/files/kubeconfig-requests-policy.yaml", "charts/trustplane/files/owner-labels-policy.yaml", "charts/trustplane/files/finalizers-policy.yaml",
		"charts/trustplane/files/cluster-versions-policy.yaml", "charts/trustplane/files/pod-identity-policies-policy.yaml", "config/jwks-server/role.yaml", "charts/trustplane/files/jwks-server-role.yaml",
		"config/jwt-signer/role.yaml", "charts/trustplane/files/jwt-signer-role.yaml"} {
		assertSameFile(t, filepath.Join(out, f), filepath.Join(root, f))
	}
	chartRole := run(t, root, filepath.Join(root, "hack/chart-rbac.sh"), filepath.Join(out, "config/rbac/role.yaml"))
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

// TestInstallManifestsAreAcceptedByTheAPIServer renders config/default, the node agent, a
// gateway using the data-plane sidecar component and the Helm chart (with and without its
// options), and applies every object with a server-side dry run.
func TestInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	root := testenv.RepoRoot()
	kubectl, helm := testenv.Tool(t, "k8s/kubectl"), testenv.Tool(t, "helm")
	chart := func(sets ...string) []byte {
		args := []string{"template", "trustplane", filepath.Join(root, "charts/trustplane"), "--namespace", "trustplane-system", "--include-crds"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		return run(t, root, helm, args...)
	}
	renders := map[string][]byte{
		"kustomize":             run(t, root, kubectl, "kustomize", filepath.Join(root, "config/default")),
		"kustomize-node-agent":  run(t, root, kubectl, "kustomize", filepath.Join(root, "config/node-agent")),
		"kustomize-gateway":     run(t, root, kubectl, "kustomize", filepath.Join(root, "test/install/testdata/gateway")),
		"helm":                  chart(),
		"helm-with-garden":      chart("garden.kubeconfigSecret=garden-kubeconfig", "garden.namespace=garden-kcp"),
		"helm-with-agents":      chart("nodeAgent.enabled=true", "dataplane.namespaces={web}"),
		"kustomize-jwks-server": run(t, root, kubectl, "kustomize", filepath.Join(root, "config/jwks-server")),
		"helm-with-jwks-server": chart("jwksServer.separate=true"),
		"kustomize-jwt-signer":  run(t, root, kubectl, "kustomize", filepath.Join(root, "config/jwt-signer")),
		"helm-with-jwt-signer":  chart("jwtSigner.enabled=true"),
	}
	// What each render must hold, beyond being accepted.
	wantKinds := map[string][]string{
		"kustomize": {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment", "Service",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
		"kustomize-node-agent": {"Namespace", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "DaemonSet",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
		"kustomize-gateway":     {"Role", "RoleBinding", "ServiceAccount", "Deployment"},
		"helm-with-agents":      {"Namespace", "DaemonSet", "Role", "RoleBinding"},
		"kustomize-jwks-server": {"ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment"},
		"kustomize-jwt-signer":  {"Role", "RoleBinding"},
		"helm-with-jwt-signer":  {"Role", "RoleBinding"},
	}
	wantKinds["helm"], wantKinds["helm-with-garden"] = wantKinds["kustomize"], wantKinds["kustomize"]
	ctx := context.Background()
	for name, rendered := range renders {
		t.Run(name, func(t *testing.T) {
			objs := testenv.DecodeYAML(t, rendered)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GetKind()]++
				if obj.GetKind() == "Namespace" {
					ensureNamespace(t, obj.GetName()) // for real: namespaced objects need it to exist
					continue
				}
				if obj.GetNamespace() != "" {
					ensureNamespace(t, obj.GetNamespace())
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
					client.FieldOwner("install-test"), client.ForceOwnership, client.DryRunAll)
				if err != nil {
					t.Errorf("%s %s/%s rejected: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
				switch obj.GetKind() {
				case "Deployment":
					if obj.GetName() == "gateway" {
						assertSidecar(t, obj)
						continue
					}
					assertHardened(t, podTemplate(t, obj))
					if strings.HasSuffix(obj.GetName(), "jwks-server") {
						assertJWKSServer(t, obj)
						continue
					}
					assertGarden(t, obj, name == "helm-with-garden")
				case "DaemonSet":
					assertHardened(t, podTemplate(t, obj))
					assertNodeAgent(t, obj)
				}
			}
			if name == "kustomize-node-agent" || name == "helm-with-agents" {
				assertNodeAgentPolicy(t, objs)
			}
			if name == "helm-with-jwks-server" {
				assertJWKSServerSeparate(t, objs)
			}
			if strings.HasSuffix(name, "jwt-signer") {
				assertJWTSignerRights(t, objs)
			}
			for _, kind := range wantKinds[name] {
				if kinds[kind] == 0 {
					t.Errorf("render has no %s (kinds: %v)", kind, kinds)
				}
			}
		})
	}
}

// assertJWTSignerRights: both installs bind the signer's generated Role, in kube-system,
// to the user trustplane:jwt-signer, and grant it nothing else.
func assertJWTSignerRights(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var role, binding int
	for _, obj := range objs {
		if !strings.HasSuffix(obj.GetName(), "jwt-signer") {
			continue // the rest of the chart
		}
		switch obj.GetKind() {
		case "Role":
			r := &rbacv1.Role{}
			testenv.FromUnstructured(t, obj, r)
			role++
			for _, rule := range r.Rules {
				if !slices.Equal(rule.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("Role %s grants %v", r.Name, rule.Verbs)
				}
			}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			testenv.FromUnstructured(t, obj, b)
			binding++
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.UserKind || b.Subjects[0].Name != "trustplane:jwt-signer" || b.Namespace != "kube-system" {
				t.Errorf("RoleBinding %s/%s binds %+v", b.Namespace, b.Name, b.Subjects)
			}
		default:
			t.Errorf("the signer's install has a %s", obj.GetKind())
		}
	}
	if role != 1 || binding != 1 {
		t.Errorf("%d Roles and %d RoleBindings, want one each", role, binding)
	}
}

// assertJWKSServer: the jwks-server Deployment runs `trustplane jwks-server` under a
// ServiceAccount of its own, serving on the port its Service targets.
func assertJWKSServer(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	pod := podTemplate(t, obj)
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "jwks-server" || !strings.HasSuffix(pod.ServiceAccountName, "jwks-server") {
		t.Errorf("%s: args %q, service account %q", obj.GetName(), c.Args, pod.ServiceAccountName)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "jwks" && p.ContainerPort == 8082 }) {
		t.Errorf("%s: no port jwks 8082: %v", obj.GetName(), c.Ports)
	}
}

// assertJWKSServerSeparate: with jwksServer.separate, the manager runs no JWKS server and
// the Service sends its requests to the jwks-server pods.
func assertJWKSServerSeparate(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if args := strings.Join(containerArgs(t, objs, "Deployment", "manager"), " "); !strings.Contains(args, "--jwks-server-bind-address=0") {
		t.Errorf("the manager still serves JWK Sets: %s", args)
	}
	for _, obj := range objs {
		if obj.GetKind() == "Service" && strings.HasSuffix(obj.GetName(), "-jwks") {
			selector, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector")
			if selector["app.kubernetes.io/component"] != "jwks-server" {
				t.Errorf("Service %s selects %v, not the jwks-server pods", obj.GetName(), selector)
			}
			return
		}
	}
	t.Error("no Service *-jwks")
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// assertSidecar checks the component added the agent as a native sidecar, leaving the
// gateway its own ServiceAccount (a Tengine gateway's RBAC is its account's).
func assertSidecar(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	pod := podTemplate(t, obj)
	if pod.ServiceAccountName != "gateway" {
		t.Errorf("gateway runs as %q, want its own ServiceAccount gateway", pod.ServiceAccountName)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "trustplane-dataplane" ||
		pod.InitContainers[0].RestartPolicy == nil || *pod.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("gateway has no native trustplane-dataplane sidecar: %+v", pod.InitContainers)
	}
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "nginx" {
		t.Errorf("the gateway's own containers changed: %+v", pod.Containers)
	}
	assertHardened(t, corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, Containers: pod.InitContainers})
}

// assertNodeAgentPolicy checks the render holds the policy keeping the node agent's
// PodCertificateRequests to its own node, cluster-scoped, enforced, and matching the
// ServiceAccount the DaemonSet runs as.
func assertNodeAgentPolicy(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var account, match string
	bound := false
	for _, obj := range objs {
		switch obj.GetKind() {
		case "DaemonSet":
			account = podTemplate(t, obj).ServiceAccountName
		case "ValidatingAdmissionPolicy":
			if strings.HasSuffix(obj.GetName(), "-pod-certificates") && obj.GetNamespace() == "" {
				conditions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matchConditions")
				for _, c := range conditions {
					match += fmt.Sprint(c.(map[string]any)["expression"])
				}
			}
		case "ValidatingAdmissionPolicyBinding":
			actions, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "validationActions")
			bound = bound || (strings.HasSuffix(obj.GetName(), "-pod-certificates") && obj.GetNamespace() == "" && slices.Equal(actions, []string{"Deny"}))
		}
	}
	if account == "" || !strings.Contains(match, "endsWith(':"+account+"')") {
		t.Errorf("no pod-certificates policy matching the node agent's ServiceAccount %q: matchConditions %q", account, match)
	}
	if !bound {
		t.Error("the pod-certificates policy is not bound cluster-wide with validationActions [Deny]")
	}
}

// assertNodeAgent checks the node name comes from the downward API and bundles go to the host.
func assertNodeAgent(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	pod := podTemplate(t, obj)
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--node-name=$(NODE_NAME)") || len(c.Env) == 0 || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("node agent does not take its node name from the downward API: args %q env %+v", c.Args, c.Env)
	}
	// Besides its configuration file (the chart's ConfigMap), the agent mounts one volume:
	// the host directory its --dir names.
	var hostPaths []string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.Name)
		} else if v.ConfigMap == nil {
			t.Errorf("node agent volume %s is neither the host directory nor its configuration", v.Name)
		}
	}
	mountedDir := ""
	for _, m := range c.VolumeMounts {
		if len(hostPaths) == 1 && m.Name == hostPaths[0] {
			mountedDir = m.MountPath
		}
	}
	if len(hostPaths) != 1 || mountedDir == "" || !slices.Contains(c.Args, "--dir="+mountedDir) {
		t.Errorf("node agent does not write its --dir to a hostPath volume: args %q volumes %+v", c.Args, pod.Volumes)
	}
}

func podTemplate(t *testing.T, obj *unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
	pod := corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &pod); err != nil {
		t.Fatal(err)
	}
	return pod
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
	// The only Secret the manager mounts is the garden's kubeconfig, read-only (the chart
	// also mounts its configuration file, a ConfigMap).
	mounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		mounted = v.Secret.SecretName == "garden-kubeconfig" && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == v.Name && m.MountPath == "/etc/trustplane/garden" && m.ReadOnly
		})
		if !mounted {
			break
		}
	}
	if configured != hasFlags || configured != mounted {
		t.Errorf("garden configured=%v, but flags=%v mounted=%v (args %q)", configured, hasFlags, mounted, args)
	}
}

// assertHardened checks a pod template is what a restricted namespace admits (the node
// agent's root user apart, which its namespace allows) and has requests and probes.
func assertHardened(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
			(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
		if !nonRoot && c.Name != "node-agent" {
			t.Errorf("container %s does not set runAsNonRoot", c.Name)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: root filesystem is writable", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s allows privilege escalation", c.Name)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s keeps capabilities", c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no resource requests", c.Name)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("container %s lacks probes", c.Name)
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

// TestChartGivesSidecarsTheirScope: per-namespace sidecars check per-namespace checksums,
// so with dataplane.namespaces set the manager publishes them too — and only then.
func TestChartGivesSidecarsTheirScope(t *testing.T) {
	root := testenv.RepoRoot()
	helm := testenv.Tool(t, "helm")
	const flag = "--secret-checksum-scopes=cluster,namespace"
	for sets, want := range map[string]bool{"dataplane.namespaces={web}": true, "nodeAgent.enabled=false": false} {
		rendered := run(t, root, helm, "template", "trustplane", filepath.Join(root, "charts/trustplane"), "--namespace", "trustplane-system", "--set", sets)
		found := false
		for _, obj := range testenv.DecodeYAML(t, rendered) {
			if obj.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				found = found || slices.Contains(args, flag)
			}
		}
		if found != want {
			t.Errorf("--set %s: manager passes %s: %v, want %v", sets, flag, found, want)
		}
	}
}
