// Package security tries, as a tenant would, to make trustplane act beyond the tenant's
// own rights (docs/security.md). The manager runs as users run it: the binary built from
// ./cmd/trustplane, with the args of the rendered config/default manifests, under the
// ServiceAccount those manifests grant. The tenant, alice, is a user impersonated on the
// real test API server, with rights only in her own namespace. Each case shows the attempt
// refused and nothing changed elsewhere.
package security

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

const (
	managerNamespace = "trustplane-system"
	aliceNamespace   = "alice"
	bobNamespace     = "bob"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

// tenantRules are what a namespace admin of a multi-tenant cluster holds in her own
// namespace: her workloads' objects, trustplane's tenant-facing kinds, and RBAC inside the
// namespace (which the API server itself keeps from exceeding her own rights).
// The platform's own objects in her namespace (ConfigMaps, Services, Deployments it put
// there) she may read but not change.
var tenantRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"secrets", "serviceaccounts", "events"}, Verbs: []string{"*"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
	// Not escalate or bind: the API server keeps her Roles within her own rights.
	{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"jwks.trustplane.io", "operator.kyma-project.io", "control-plane.kyma-project.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
}

// tenant is a user with tenantRules in one namespace, and a client acting as that user.
type tenant struct {
	name, namespace string
	client          client.Client
}

func newTenant(t *testing.T, user, namespace string) *tenant {
	t.Helper()
	mustCreate(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	mustCreate(t, env.Client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant"}, Rules: tenantRules})
	mustCreate(t, env.Client, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return &tenant{name: user, namespace: namespace, client: c}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// shipped is the manager TestATenantCannot runs, for the cases that talk to it.
var shipped *managerProcess

// managerProcess is the manager as shipped, under its own ServiceAccount.
type managerProcess struct {
	jwksServer string
	pid        int
}

// startManager installs config/default and runs `trustplane manager` with the rendered
// args (the pod's environment supplied explicitly), plus extra flags.
func startManager(t *testing.T, extra ...string) *managerProcess {
	t.Helper()
	manifests := testenv.Rendered(t, "config/default")
	env.Install(t, manifests)
	// No kube-controller-manager or kubelet: a stand-in rolls the nginx Deployments out.
	env.RollOutDeployments(t, jwksv1alpha1.OwnerLabel)
	probes, jwksServer := testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := testenv.ArgsOf(t, testenv.ContainerOf(t, testenv.PodSpecOf(t, manifests, "Deployment", "trustplane-manager"), "manager"), nil,
		append([]string{
			"--kubeconfig=" + env.ServiceAccountKubeconfig(t, managerNamespace, "trustplane-manager"),
			"--leader-election-namespace=" + managerNamespace, "--podcertificate-signer-ca-namespace=" + managerNamespace,
			"--secret-checksum-publish-namespace=" + managerNamespace,
			"--metrics-bind-address=" + testenv.FreeAddr(t), "--health-probe-bind-address=" + probes, "--jwks-server-bind-address=" + jwksServer,
		}, extra...)...)
	p := testenv.StartProcess(t, testenv.Binary(t), args...)
	p.WaitHTTP200(t, fmt.Sprintf("http://%s/readyz", probes), 60*time.Second)
	return &managerProcess{jwksServer: jwksServer, pid: p.Pid()}
}

// unchanged fails the test when obj (re-read) is not at the resourceVersion it had.
func unchanged(t *testing.T, obj client.Object) {
	t.Helper()
	rv := obj.GetResourceVersion()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("%T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	if obj.GetResourceVersion() != rv {
		t.Errorf("%T %s/%s was written (resourceVersion %s → %s)", obj, obj.GetNamespace(), obj.GetName(), rv, obj.GetResourceVersion())
	}
}

// TestATenantCannot runs every attempt against one manager; each case has its own
// objects, so they run in parallel.
func TestATenantCannot(t *testing.T) {
	shipped = startManager(t)
	alice := newTenant(t, "alice", aliceNamespace)
	newTenant(t, "bob", bobNamespace)
	t.Run("group", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, alice)
			})
		}
	})
}

// cases are filled in by the files of this package, one per system.
var cases []struct {
	name string
	run  func(t *testing.T, alice *tenant)
}

func register(name string, run func(t *testing.T, alice *tenant)) {
	cases = append(cases, struct {
		name string
		run  func(t *testing.T, alice *tenant)
	}{name, run})
}
