package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// TestManagerRunsSelectedControllersWithProbesMetricsAndLeaderElection starts the manager
// against the real API server with two controllers, one of them deselected.
func TestManagerRunsSelectedControllersWithProbesMetricsAndLeaderElection(t *testing.T) {
	var seen, deselectedRan atomic.Int32
	watchConfigMaps := func(counter *atomic.Int32, name string) func(ctrl.Manager) error {
		return func(mgr ctrl.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).Named(name).For(&corev1.ConfigMap{}).
				Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					counter.Add(1)
					return reconcile.Result{}, nil
				}))
		}
	}
	// Each controller's collectors: the manager registers those of the controllers it runs.
	watcherGauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_test_watcher_gauge", Help: "The watcher's."})
	otherGauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_test_other_gauge", Help: "The deselected controller's."})
	known := []Controller{
		{Name: "watcher", Setup: watchConfigMaps(&seen, "watcher"), Collectors: []prometheus.Collector{watcherGauge}},
		{Name: "other", Setup: watchConfigMaps(&deselectedRan, "other"), Collectors: []prometheus.Collector{otherGauge}},
	}
	opts := DefaultOptions()
	opts.Controllers = []string{"*", "-other"}
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = "default"
	opts.LeaderElectionID = "trustplane-manager-test"

	mgr, err := New(env.Config, opts, known)
	if err != nil {
		t.Fatal(err)
	}
	ctx := run(t, mgr, nil)

	testenv.Eventually(t, "readyz OK", 30*time.Second, func() bool { return httpGet(opts.HealthProbeBindAddress, "/readyz") == 200 })
	if code := httpGet(opts.HealthProbeBindAddress, "/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "manager-test", Namespace: "default"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "selected controller reconciles", 30*time.Second, func() bool { return seen.Load() > 0 })
	if n := deselectedRan.Load(); n != 0 {
		t.Errorf("deselected controller reconciled %d times", n)
	}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.LeaderElectionID}, lease); err != nil {
		t.Errorf("leader Lease: %v", err)
	}
	body := httpBody(t, opts.MetricsBindAddress, "/metrics")
	if !strings.Contains(body, `controller_runtime_reconcile_total{controller="watcher"`) {
		t.Errorf("/metrics lacks the watcher controller's reconcile counter")
	}
	if !strings.Contains(body, "trustplane_test_watcher_gauge 0") {
		t.Errorf("/metrics lacks the selected controller's own collector")
	}
	if strings.Contains(body, "trustplane_test_other_gauge") {
		t.Errorf("/metrics exports the deselected controller's collector")
	}
	var already prometheus.AlreadyRegisteredError // an empty vector has no line at /metrics
	if err := metrics.Registry.Register(status.Metrics()[0]); !errors.As(err, &already) {
		t.Errorf("the status metrics every controller reports are not registered (registering again: %v)", err)
	}
}

func TestNewRejectsEmptySelection(t *testing.T) {
	opts := DefaultOptions()
	opts.Controllers = []string{"-a"}
	_, err := New(env.Config, opts, []Controller{{Name: "a"}})
	if err == nil || !strings.Contains(err.Error(), "selects no controller") {
		t.Fatalf("err = %v", err)
	}
}

// run starts mgr until the test ends, when beforeStop (unless nil) runs first.
func run(t *testing.T, mgr ctrl.Manager, beforeStop func()) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		if beforeStop != nil {
			beforeStop()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with error: %v", err)
		}
	})
	return ctx
}

func httpGet(addr, path string) int {
	resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func httpBody(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestPlainMetricsDefaultToLoopback: without flags, /metrics (plain HTTP, no authorization)
// is reachable from this host only.
func TestPlainMetricsDefaultToLoopback(t *testing.T) {
	opts := DefaultOptions()
	if opts.MetricsSecure || !Loopback(opts.MetricsBindAddress) {
		t.Errorf("default metrics: secure=%v on %q, want plain on loopback only", opts.MetricsSecure, opts.MetricsBindAddress)
	}
	for addr, want := range map[string]bool{"0": true, "127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:8080": false, "[::]:8080": false, "nonsense": false} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// unsyncedCache is a real cache whose sync the test decides: the fault of a private
// cache still listing (a signer's every pod) that a real API server answers too fast to
// be seen.
type unsyncedCache struct {
	cache.Cache
	release chan struct{}
	once    *sync.Once
}

// sync lets the cache sync (once; again is a no-op).
func (c unsyncedCache) sync() { c.once.Do(func() { close(c.release) }) }

func (c unsyncedCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.release:
		return c.Cache.WaitForCacheSync(ctx)
	case <-ctx.Done():
		return false
	}
}

// TestNotReadyUntilPrivateCachesSync: a replica whose private cache (AddCache) has not
// synced is not ready, though the manager's own cache has; once it syncs, it is.
func TestNotReadyUntilPrivateCachesSync(t *testing.T) {
	private := unsyncedCache{release: make(chan struct{}), once: &sync.Once{}}
	known := []Controller{{Name: "private", Setup: func(mgr ctrl.Manager) error {
		c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return err
		}
		private.Cache = c
		return AddCache(mgr, private)
	}}}
	opts := DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	mgr, err := New(env.Config, opts, known)
	if err != nil {
		t.Fatal(err)
	}
	ctx := run(t, mgr, private.sync) // a manager still waiting for the cache would not stop
	testenv.Eventually(t, "the manager's own cache synced", 30*time.Second, func() bool {
		return mgr.GetCache().WaitForCacheSync(ctx)
	})
	var code int
	testenv.Eventually(t, "the probe server answers", 30*time.Second, func() bool {
		code = httpGet(opts.HealthProbeBindAddress, "/readyz")
		return code != 0
	})
	if code != http.StatusInternalServerError {
		t.Fatalf("/readyz = %d with a private cache not synced, want 500", code)
	}
	private.sync()
	testenv.Eventually(t, "readyz OK once the private cache synced", 30*time.Second, func() bool {
		return httpGet(opts.HealthProbeBindAddress, "/readyz") == http.StatusOK
	})
}

// TestTheManagersClientWritesAStatusAsAnUpdate: every controller gets the manager's client,
// and through it the Patcher writes a status as an update at the version read
// (status.WithStatusUpdates), not a merge patch, as the API server counts them.
func TestTheManagersClientWritesAStatusAsAnUpdate(t *testing.T) {
	opts := DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	mgr, err := New(env.Config, opts, []Controller{{Name: "none", Setup: func(ctrl.Manager) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "status-update"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls"}}
	if err := env.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
	writes := func() (map[string]int, error) {
		return testenv.APIRequestsBy(ctx, env.Config, func(labels string) string {
			if !strings.Contains(labels, `resource="jwksconfigs"`) || !strings.Contains(labels, `subresource="status"`) {
				return ""
			}
			for _, verb := range []string{"PUT", "PATCH"} {
				if strings.Contains(labels, `verb="`+verb+`"`) {
					return verb
				}
			}
			return ""
		})
	}
	before, err := writes()
	if err != nil {
		t.Fatal(err)
	}
	p := status.NewPatcher(cfg)
	status.MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
	if err := p.Patch(ctx, mgr.GetClient()); err != nil {
		t.Fatal(err)
	}
	after, err := writes()
	if err != nil {
		t.Fatal(err)
	}
	if put, patch := after["PUT"]-before["PUT"], after["PATCH"]-before["PATCH"]; put != 1 || patch != 0 {
		t.Errorf("the manager's client wrote a status in %d PUT and %d PATCH requests, want one PUT", put, patch)
	}
}
