package install

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trustplane/trustplane/internal/testenv"
)

// TestChartPassesTengineClassFlags: the chart's checksum values reach the manager as
// the secret-checksum controller's Tengine class flags, which `trustplane manager` knows;
// with sidecars, their ServiceAccounts may read IngressClasses.
func TestChartPassesTengineClassFlags(t *testing.T) {
	root := testenv.RepoRoot()
	objs := testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
		"--namespace", "trustplane-system", "--set", "dataplane.namespaces={web,edge}", "--set",
		"checksum.ingressClass=internal,checksum.controllerClass=example.com/gateway,checksum.watchIngressWithoutClass=true,checksum.ingressClassByName=true,checksum.ignoreIngressClass=true"))
	args := managerArgs(t, objs)
	stdout, stderr, code := testenv.RunCommand(t, testenv.Binary(t), "manager", "--help")
	if code != 0 {
		t.Fatalf("trustplane manager --help: exit %d, %s", code, stderr)
	}
	for _, want := range []string{"--secret-checksum-ingress-class=internal", "--secret-checksum-controller-class=example.com/gateway",
		"--secret-checksum-watch-ingress-without-class=true", "--secret-checksum-ingress-class-by-name=true", "--secret-checksum-ignore-ingress-class=true"} {
		if !slices.Contains(args, want) {
			t.Errorf("the manager is not passed %s: %v", want, args)
		}
		if flag, _, _ := strings.Cut(want, "="); !strings.Contains(stdout, flag+" ") {
			t.Errorf("trustplane manager does not know %s", flag)
		}
	}

	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "ClusterRole" && obj.GetName() == "trustplane-dataplane":
			role = &rbacv1.ClusterRole{}
			testenv.FromUnstructured(t, obj, role)
		case obj.GetKind() == "ClusterRoleBinding" && obj.GetName() == "trustplane-dataplane":
			binding = &rbacv1.ClusterRoleBinding{}
			testenv.FromUnstructured(t, obj, binding)
		}
	}
	if role == nil || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"ingressclasses"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Fatalf("the sidecars' ClusterRole: %+v, want IngressClasses read only", role)
	}
	if binding == nil {
		t.Fatal("no ClusterRoleBinding for the sidecars' ClusterRole")
	}
	var subjects []string
	for _, s := range binding.Subjects {
		subjects = append(subjects, s.Kind+" "+s.Namespace+"/"+s.Name)
	}
	if binding.RoleRef.Name != role.Name || !slices.Equal(subjects, []string{"ServiceAccount web/trustplane-dataplane", "ServiceAccount edge/trustplane-dataplane"}) {
		t.Errorf("the sidecars' ClusterRoleBinding: %+v", binding)
	}
}

// TestChartBindsTheSidecarsToTheGatewaysAccount: with dataplane.serviceAccountName, the
// chart binds the Role and the ClusterRole to the gateways' own ServiceAccount and creates
// no account of its own, so a sidecar never takes a gateway's RBAC away.
func TestChartBindsTheSidecarsToTheGatewaysAccount(t *testing.T) {
	root := testenv.RepoRoot()
	objs := testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"),
		"--namespace", "trustplane-system", "--set", "dataplane.namespaces={web,edge}", "--set", "dataplane.serviceAccountName=tengine"))
	var subjects []string
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ServiceAccount":
			if obj.GetName() == "trustplane-dataplane" {
				t.Errorf("the chart creates ServiceAccount %s/%s though the gateways run as tengine", obj.GetNamespace(), obj.GetName())
			}
		case "RoleBinding", "ClusterRoleBinding":
			binding := &rbacv1.RoleBinding{}
			testenv.FromUnstructured(t, obj, binding)
			if binding.RoleRef.Name != "trustplane-dataplane" {
				continue
			}
			for _, s := range binding.Subjects {
				subjects = append(subjects, obj.GetKind()+" "+s.Namespace+"/"+s.Name)
			}
		}
	}
	want := []string{"RoleBinding web/tengine", "RoleBinding edge/tengine", "ClusterRoleBinding web/tengine", "ClusterRoleBinding edge/tengine"}
	slices.Sort(subjects)
	slices.Sort(want)
	if !slices.Equal(subjects, want) {
		t.Errorf("the sidecars' bindings name %v, want %v", subjects, want)
	}
}

// TestTwoReleasesDoNotCollide: two releases of the chart name every object apart, the
// sidecars' accounts and RBAC in a gateway namespace they share included (helm refuses to
// install an object another release owns). The admission policies have fixed names, so
// the second release leaves them off, and its node agent gets a namespace of its own, as
// values.yaml says.
func TestTwoReleasesDoNotCollide(t *testing.T) {
	root := testenv.RepoRoot()
	owner := map[string]string{}
	for i, release := range []string{"trustplane", "second"} {
		args := []string{"template", release, filepath.Join(root, "charts/trustplane"),
			"--namespace", release + "-system", "--set", "dataplane.namespaces={web}", "--set", "nodeAgent.enabled=true"}
		if i > 0 {
			args = append(args, "--set", "roleAggregation.admissionPolicy=false", "--set", "statusWriters.admissionPolicy=false", "--set", "clusterVersions.admissionPolicy=false", "--set", "podIdentityPolicies.admissionPolicy=false",
				"--set", "nodeAgent.namespace="+release+"-node-agent")
		}
		objs := testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), args...))
		for _, obj := range objs {
			key := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
			if other, taken := owner[key]; taken && other != release {
				t.Errorf("releases %s and %s both render %s", other, release, key)
			}
			owner[key] = release
		}
	}
}
