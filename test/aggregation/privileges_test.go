package aggregation_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/aggregation/clusterroleaggregation"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// startEnv starts an API server of the test's own.
func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// asManager installs the manager's generated ServiceAccount, ClusterRole and binding
// (config/rbac, as `make manifests` writes them) and returns an environment whose Config
// and Client authenticate as that ServiceAccount.
func asManager(t *testing.T, env *testenv.Env) *testenv.Env {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, namespaceObject("trustplane-system")); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml"} {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config/rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range testenv.DecodeYAML(t, raw) {
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.ServiceAccountKubeconfig(t, "trustplane-system", "trustplane-manager"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	sa := *env
	sa.Config, sa.Client = cfg, cl
	return &sa
}

func runBoth(t *testing.T, env *testenv.Env) {
	t.Helper()
	env.RunManager(t, func(mgr ctrl.Manager) error {
		if _, err := clusterroleaggregation.Setup(mgr, clusterroleaggregation.DefaultOptions()); err != nil {
			return err
		}
		_, err := roleaggregation.Setup(mgr, roleaggregation.Options{Workers: 2, TrustRoleAuthors: true})
		return err
	})
}

func get(t *testing.T, cl client.Client, obj client.Object, namespace, name string) error {
	t.Helper()
	return cl.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, obj)
}

func mustCreate(t *testing.T, cl client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := cl.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
}

// writeLog wraps a client and records the errors of its applies and any create.
type writeLog struct {
	mu      sync.Mutex
	applies []error
	creates int
}

func (w *writeLog) wrap(cl client.Client) client.Client {
	return interceptor.NewClient(cl.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			err := cl.Apply(ctx, obj, opts...)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.applies = append(w.applies, err)
			return err
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.mu.Lock()
			w.creates++
			w.mu.Unlock()
			return cl.Create(ctx, obj, opts...)
		},
	})
}

func watchingClient(t *testing.T, env *testenv.Env) client.WithWatch {
	t.Helper()
	cl, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// stale is a cache that still holds objs: a view from before a deletion.
func stale(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
}

// TestDeletedRoleStaysDeletedUnderManagerRBAC runs both aggregation controllers as the
// manager's ServiceAccount, bound to nothing but the generated ClusterRole: aggregation
// works, and a sync from a view taken before the aggregated role was deleted (the cache
// lagging behind the deletion) is refused by the API server — no create — and ends
// without an error, while the same sync with create rights would bring the role back.
func TestDeletedRoleStaysDeletedUnderManagerRBAC(t *testing.T) {
	admin := startEnv(t)
	sa := asManager(t, admin)
	runBoth(t, sa)
	ctx := context.Background()
	ns := admin.Namespace(t, "roleagg")

	src := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "priv-src", Labels: map[string]string{"priv": "true"}},
		Rules: []rbacv1.PolicyRule{rule("get", "pods")}}
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "priv-agg"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"priv": "true"}}}}}
	roleSrc := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src", Labels: map[string]string{"priv": "true"}},
		Rules: []rbacv1.PolicyRule{rule("get", "secrets")}}
	roleAgg := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agg",
		Annotations: map[string]string{roleaggregation.SelectorAnnotation: "priv=true"}}}
	mustCreate(t, admin.Client, src, agg, roleSrc, roleAgg)

	// Aggregation works under the generated RBAC alone.
	aggregated := &rbacv1.ClusterRole{}
	testenv.Eventually(t, "the ClusterRole aggregated", 30*time.Second, func() bool {
		return get(t, admin.Client, aggregated, "", agg.Name) == nil && len(aggregated.Rules) == 1
	})
	aggregatedRole := &rbacv1.Role{}
	testenv.Eventually(t, "the Role aggregated", 30*time.Second, func() bool {
		return get(t, admin.Client, aggregatedRole, ns, roleAgg.Name) == nil && len(aggregatedRole.Rules) == 1
	})

	// The views from before the deletions, with a source whose rules changed since.
	src.Rules = append(src.Rules, rule("list", "pods"))
	roleSrc.Rules = append(roleSrc.Rules, rule("list", "secrets"))
	staleCluster := stale(t, aggregated.DeepCopy(), src)
	staleNamespaced := stale(t, aggregatedRole.DeepCopy(), roleSrc)
	for _, obj := range []client.Object{aggregated, aggregatedRole} {
		if err := admin.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("ClusterRole", func(t *testing.T) {
		log := &writeLog{}
		saClient := watchingClient(t, sa)
		r := &clusterroleaggregation.Reconciler{Reader: staleCluster, Writer: log.wrap(saClient), Live: saClient, Index: rbac.NewIndex()}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: agg.Name}}); err != nil {
			t.Fatalf("a sync of a deleted role: %v, want a quiet end", err)
		}
		requireRefused(t, log)
		if err := get(t, admin.Client, &rbacv1.ClusterRole{}, "", agg.Name); !apierrors.IsNotFound(err) {
			t.Fatalf("the deleted ClusterRole: %v, want NotFound", err)
		}
		// The control: with create (the admin's rights), the same sync resurrects it.
		adminClient := watchingClient(t, admin)
		r = &clusterroleaggregation.Reconciler{Reader: staleCluster, Writer: adminClient, Live: adminClient, Index: rbac.NewIndex()}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: agg.Name}}); err != nil {
			t.Fatal(err)
		}
		if err := get(t, admin.Client, &rbacv1.ClusterRole{}, "", agg.Name); err != nil {
			t.Fatalf("with create rights the stale sync should have recreated the role (else this test proves nothing): %v", err)
		}
	})
	t.Run("Role", func(t *testing.T) {
		log := &writeLog{}
		saClient := watchingClient(t, sa)
		r := &roleaggregation.Reconciler{Reader: staleNamespaced, Writer: log.wrap(saClient), Live: saClient, TrustRoleAuthors: true,
			Recorder: events.NewFakeRecorder(10), Index: rbac.NewIndex()}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: roleAgg.Name}}); err != nil {
			t.Fatalf("a sync of a deleted Role: %v, want a quiet end", err)
		}
		requireRefused(t, log)
		if err := get(t, admin.Client, &rbacv1.Role{}, ns, roleAgg.Name); !apierrors.IsNotFound(err) {
			t.Fatalf("the deleted Role: %v, want NotFound", err)
		}
	})
}

// requireRefused: the sync tried exactly one apply, the API server refused it for want of
// create, and nothing else created anything.
func requireRefused(t *testing.T, log *writeLog) {
	t.Helper()
	if len(log.applies) != 1 || !apierrors.IsForbidden(log.applies[0]) || log.creates != 0 {
		t.Fatalf("applies %v, creates %d: want one apply, Forbidden, and no create", log.applies, log.creates)
	}
}
