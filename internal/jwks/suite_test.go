package jwks

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	os.Exit(testenv.Main(m, &env))
}

// runningManager is a manager with only the jwks controller, started for one test.
type runningManager struct {
	serverAddr string
	reconciler *Reconciler
	stop       func()
}

// startManager runs the controller against the test API server until the test ends
// (or stop is called).
func startManager(t *testing.T, mutate ...func(*Options)) *runningManager {
	t.Helper()
	return startManagerWith(t, nil, mutate...)
}

// startManagerWith is startManager with the manager's own options changed by managerOpts
// (when not nil): its client, for one.
func startManagerWith(t *testing.T, managerOpts func(*ctrl.Options), mutate ...func(*Options)) *runningManager {
	t.Helper()
	opts := DefaultOptions()
	opts.MinUpdateInterval = 0
	opts.ServerBindAddress = testenv.FreeAddr(t)
	for _, m := range mutate {
		m(&opts)
	}
	// No kube-controller-manager or kubelet here: a stand-in says the nginx Deployments
	// rolled out (namespaces labelled testenv.NoRolloutLabel excepted).
	env.RollOutDeployments(t, jwksv1alpha1.OwnerLabel)
	var r *Reconciler
	var informers cache.Cache
	var mgrOpts []func(*ctrl.Options)
	if managerOpts != nil {
		mgrOpts = append(mgrOpts, managerOpts)
	}
	stop := env.RunManager(t, func(mgr ctrl.Manager) (err error) {
		informers = mgr.GetCache()
		r, err = Setup(mgr, opts)
		return err
	}, mgrOpts...)
	syncCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !informers.WaitForCacheSync(syncCtx) {
		t.Fatal("caches did not sync")
	}
	return &runningManager{serverAddr: opts.ServerBindAddress, reconciler: r, stop: stop}
}

func newNamespace(t *testing.T) string { return env.Namespace(t, "jwks") }

func newChain(t testing.TB, kt testcerts.KeyType) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	return issue(t, key)
}

// renew issues a new certificate for the same key, as cert-manager does with
// rotationPolicy: Never.
func renew(t *testing.T, c testcerts.Chain) testcerts.Chain {
	t.Helper()
	return issue(t, c.LeafKey)
}

func issue(t testing.TB, key crypto.Signer) testcerts.Chain {
	t.Helper()
	c, err := testcerts.NewChain(key, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// putSecret creates or replaces a kubernetes.io/tls Secret's data.
func putSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque, Data: data}
	err := env.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		cur := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Data = data
		err = env.Client.Update(ctx, cur)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func tlsData(c testcerts.Chain) map[string][]byte {
	return map[string][]byte{corev1.TLSCertKey: c.PEM(), corev1.TLSPrivateKeyKey: c.KeyPEM()}
}

func newJWKSConfig(t *testing.T, ns, name, secret string, mutate ...func(*jwksv1alpha1.JWKSConfig)) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: secret},
	}
	for _, m := range mutate {
		m(cfg)
	}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func getConfig(t *testing.T, ns, name string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// sample calls probe every interval, in the background, until the returned stop is
// called; stop returns once the last probe has finished.
func sample(interval time.Duration, probe func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			probe()
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// updateConfig changes a JWKSConfig's spec as a user would, read afresh and retried
// while the controller's own status writes move its resourceVersion.
func updateConfig(t *testing.T, ns, name string, change func(*jwksv1alpha1.JWKSConfig)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := getConfig(t, ns, name)
		change(cfg)
		return env.Client.Update(context.Background(), cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func getConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatalf("ConfigMap %s: %v", name, err)
	}
	return cm
}

func readyCondition(cfg *jwksv1alpha1.JWKSConfig) *metav1.Condition {
	return meta.FindStatusCondition(cfg.Status.Conditions, conditions.Ready)
}

// waitReady waits until Ready has the given status and reason for the current generation.
func waitReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	return waitReadyMessage(t, ns, name, status, reason, "")
}

// waitReadyMessage is waitReady that also waits for the message to contain msg.
func waitReadyMessage(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, msg string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cfg := getConfig(t, ns, name)
		c := readyCondition(cfg)
		if c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == cfg.Generation && strings.Contains(c.Message, msg) {
			return cfg
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s/%s Ready=%s %s %q; generation %d, last status %+v%s", ns, name, status, reason, msg, cfg.Generation, cfg.Status, nginxRollout(ns, name))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nginxRollout describes the nginx Deployment's rollout, for a timeout's message: which
// generation the (stand-in) Deployment controller has seen, and its replicas.
func nginxRollout(ns, name string) string {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return "; nginx Deployment: " + err.Error()
	}
	return fmt.Sprintf("; nginx Deployment generation %d, resourceVersion %s, status %+v", d.Generation, d.ResourceVersion, d.Status)
}

// eventsFor lists events about the named object with the given reason.
func eventsFor(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event about the named object with the given reason: the
// recorder writes events from its own goroutine, after the reconcile that made them.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("a %s event for %s/%s", reason, ns, name), 30*time.Second, func() bool {
		return len(eventsFor(t, ns, name, reason)) > 0
	})
}

func boolPtr(b bool) *bool { return ptr.To(b) }

// withoutNginx publishes only the ConfigMap and trustplane's own endpoint: for tests of
// the set itself, driven by hand, where no stand-in rolls the nginx Deployment out.
func withoutNginx(c *jwksv1alpha1.JWKSConfig) { c.Spec.Nginx.Enabled = ptr.To(false) }
