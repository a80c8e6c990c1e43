package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/controller/secretchecksum"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	apiSecrets = flag.Int("apiserver-secrets", 30000, "TLS Secrets stored in the real API server (0 skips that run).")
	apiChanges = flag.Int("apiserver-changes", 100, "Single-secret changes timed end to end through the API server.")
)

// apiServerRun stores the Secrets in a real kube-apiserver, runs the secret-checksum
// controller with its shipped defaults, and watches SecretCheckSums as a data plane
// would: it prints the time to the first publication, then for each single change the
// time from the Secret's update to the new object's arrival at the watcher.
func apiServerRun() error {
	if *apiSecrets == 0 {
		return nil
	}
	ctrl.SetLogger(logr.Discard()) // the controller's info logs would drown the figures
	fmt.Printf("\nthrough the API server: %d TLS Secrets in 3 namespaces, cluster scope, %d single changes\n", *apiSecrets, *apiChanges)
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg := fastConfig(env)
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	namespaces := []string{"edge", "web", "api"}
	start := time.Now()
	world, err := storeSecrets(ctx, c, namespaces, *apiSecrets)
	if err != nil {
		return err
	}
	fmt.Printf("stored %d Secrets in %v\n", len(world.ids), time.Since(start).Round(time.Second))

	arrivals, err := watchPublished(ctx, cfg, namespaces[0])
	if err != nil {
		return err
	}
	start = time.Now()
	if err := runController(ctx, cfg, namespaces[0]); err != nil {
		return err
	}
	first, err := arrivals.await(world.set.Checksum(), 5*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("first publication over %d IDs: %v after the controller started; ids omitted: %q\n",
		world.set.Len(), first.at.Sub(start).Round(time.Millisecond), first.omitted)

	var latencies []time.Duration
	for i := range *apiChanges {
		target := world.names[i*len(world.names) / *apiChanges]
		sent, err := world.bump(ctx, c, target)
		if err != nil {
			return err
		}
		got, err := arrivals.await(world.set.Checksum(), time.Minute)
		if err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
		latencies = append(latencies, got.at.Sub(sent))
	}
	fmt.Printf("one Secret changed → new SecretCheckSum at the watching data plane: p50 %v, p99 %v (quiet period %v included)\n",
		percentile(latencies, 0.5).Round(time.Millisecond), percentile(latencies, 0.99).Round(time.Millisecond),
		secretchecksum.DefaultOptions().QuietPeriod)
	return nil
}

// fastConfig lifts client-side rate limits: the bench measures the server and the controller.
func fastConfig(env *testenv.Env) *rest.Config {
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	return &cfg
}

// world is what the bench stored and its expected checksum, kept independently of the
// controller.
type world struct {
	set      *checksum.Set
	names    []types.NamespacedName
	ids      map[types.NamespacedName]string
	versions map[types.NamespacedName]int
	data     map[string][]byte // one certificate and key shared by all Secrets
	pemSHA   string
}

// storeSecrets creates n versioned TLS Secrets spread over the namespaces. They share
// one certificate (parsing is not what this run measures; IDs differ by name).
func storeSecrets(ctx context.Context, c client.Client, namespaces []string, n int) (*world, error) {
	one, err := makeSecrets(1)
	if err != nil {
		return nil, err
	}
	w := &world{set: checksum.NewSet(), ids: map[types.NamespacedName]string{}, versions: map[types.NamespacedName]int{}, data: one[0].data}
	if w.pemSHA, err = checksum.SecretPemSHA(w.data); err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	for i := range n {
		w.names = append(w.names, types.NamespacedName{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("site-%d", i)})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	var mu sync.Mutex
	for _, name := range w.names {
		g.Go(func() error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name,
				Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}}, Type: corev1.SecretTypeTLS, Data: w.data}
			if err := c.Create(gctx, s); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			return w.record(name, 1)
		})
	}
	return w, g.Wait()
}

func (w *world) record(name types.NamespacedName, version int) error {
	id, err := checksum.SecretIDWithPemSHA(name.Name, map[string]string{checksum.DefaultVersionAnnotation: strconv.Itoa(version)}, checksum.DefaultVersionAnnotation, w.pemSHA)
	if err != nil {
		return err
	}
	w.ids[name], w.versions[name] = id, version
	w.set.Put(name.String(), id)
	return nil
}

// bump gives one Secret a new version and returns when the API server accepted it.
func (w *world) bump(ctx context.Context, c client.Client, name types.NamespacedName) (time.Time, error) {
	version := w.versions[name] + 1
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, checksum.DefaultVersionAnnotation, strconv.Itoa(version))
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}}
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return time.Time{}, err
	}
	sent := time.Now()
	return sent, w.record(name, version)
}

func runController(ctx context.Context, cfg *rest.Config, publishNamespace string) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	opts := secretchecksum.DefaultOptions()
	opts.PublishNamespace = publishNamespace
	if _, err := secretchecksum.Setup(mgr, opts); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

// arrival is a SecretCheckSum as the watcher first saw it.
type arrival struct {
	checksum string
	omitted  string
	at       time.Time
}

// arrivals are the SecretCheckSums a data plane's watch delivered, by checksum.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]arrival
	cond *sync.Cond
}

func watchPublished(ctx context.Context, cfg *rest.Config, ns string) (*arrivals, error) {
	a := &arrivals{seen: map[string]arrival{}}
	a.cond = sync.NewCond(&a.mu)
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := informers.GetInformer(ctx, &tenginev1.SecretCheckSum{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		sum, ok := obj.(*tenginev1.SecretCheckSum)
		if !ok {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if _, dup := a.seen[sum.Spec.Checksum]; !dup {
			a.seen[sum.Spec.Checksum] = arrival{sum.Spec.Checksum, sum.Annotations[checksum.IDsOmittedAnnotation], time.Now()}
		}
		a.cond.Broadcast()
	}}); err != nil {
		return nil, err
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the watcher's cache did not sync")
	}
	return a, nil
}

// await returns the arrival of the object with the checksum.
func (a *arrivals) await(sum string, timeout time.Duration) (arrival, error) {
	timer := time.AfterFunc(timeout, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if got, ok := a.seen[sum]; ok {
			return got, nil
		}
		if time.Now().After(deadline) {
			return arrival{}, fmt.Errorf("no SecretCheckSum %s within %v", sum, timeout)
		}
		a.cond.Wait()
	}
}
