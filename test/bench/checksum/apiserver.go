//go:build bench

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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/checksum/secretchecksum"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	apiSecrets = flag.Int("apiserver-secrets", 30000, "TLS Secrets stored in the real API server (0 skips that run).")
	apiChanges = flag.Int("apiserver-changes", 100, "Single-secret changes timed end to end through the API server, in each of the four timed series (the controller as shipped and with no quiet period, and the floor of each).")
)

// apiServerRun stores the Secrets in a real kube-apiserver and watches SecretCheckSums as
// a data plane would. It runs the secret-checksum controller with its shipped defaults:
// the time to the first publication, then for each single change the time from the
// Secret's update to the new object's arrival at the watcher (the 1 s quiet period
// included). Then the same changes with the quiet period off. Last, the floors, the
// controller stopped: a plain client that, after each Secret update, waits the same quiet
// period (or not at all), then creates the same SecretCheckSum (its checksum known
// beforehand) and deletes the previous one, one at a time as the controller publishes,
// to the same API server and watcher. The verdict is on the shipped setting.
func apiServerRun() error {
	if *apiSecrets == 0 {
		return nil
	}
	ctrl.SetLogger(logr.Discard()) // the controller's info logs would drown the figures
	fmt.Printf("\nthrough the API server: %d TLS Secrets in 3 namespaces, cluster scope, %d single changes per run\n", *apiSecrets, *apiChanges)
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
	r := &apiRun{c: c, cfg: cfg, world: world, arrivals: arrivals, namespace: namespaces[0]}
	if err := r.controllerRuns(ctx); err != nil {
		return err
	}
	if err := r.floorRuns(ctx); err != nil {
		return err
	}
	return testenv.RecordBench(r.rows()...)
}

// apiRun is the run through the API server and its figures.
type apiRun struct {
	c         client.Client
	cfg       *rest.Config
	world     *world
	arrivals  *arrivals
	namespace string
	changes   int // changes made so far: each run's start in the sequence of Secrets bumped

	quietPeriod      time.Duration // shipped
	firstPublication time.Duration
	// Each change's latency: the controller with its shipped quiet period and with none,
	// and the floor waiting as long.
	shipped, shippedFloor []time.Duration
	quietOff, quietFloor  []time.Duration
}

// controllerRuns times the first publication and the changes under the controller, as
// shipped and with the quiet period off.
func (r *apiRun) controllerRuns(ctx context.Context) error {
	opts := secretchecksum.DefaultOptions()
	opts.PublishNamespace = r.namespace
	r.quietPeriod = opts.QuietPeriod
	start := time.Now()
	stop, err := runController(ctx, r.cfg, opts)
	if err != nil {
		return err
	}
	first, err := r.arrivals.await(r.world.set.Checksum(), 5*time.Minute)
	if err != nil {
		stop()
		return err
	}
	r.firstPublication = first.at.Sub(start)
	fmt.Printf("first publication over %d IDs: %v after the controller started; ids omitted: %q\n",
		r.world.set.Len(), r.firstPublication.Round(time.Millisecond), first.omitted)
	r.shipped, err = r.timeChanges(ctx, *apiChanges, nil)
	stop()
	if err != nil {
		return err
	}
	fmt.Printf("one Secret changed → new SecretCheckSum at the watching data plane: p50 %v, p99 %v (quiet period %v included)\n",
		pct(r.shipped, 0.5), pct(r.shipped, 0.99), opts.QuietPeriod)

	// Quiet period off: the controller's own cost per change.
	opts.QuietPeriod = 0
	if stop, err = runController(ctx, r.cfg, opts); err != nil {
		return err
	}
	defer stop()
	// The first change after a start also proves the new controller's caches synced.
	if _, err := r.timeChanges(ctx, 1, nil); err != nil {
		return err
	}
	r.quietOff, err = r.timeChanges(ctx, *apiChanges, nil)
	return err
}

// floorRuns times the same changes published by a plain client, the controller stopped:
// after the shipped quiet period, then at once.
func (r *apiRun) floorRuns(ctx context.Context) error {
	floor := &floorPublisher{c: r.c, namespace: r.namespace, world: r.world}
	if err := floor.adopt(ctx); err != nil {
		return err
	}
	var err error
	if r.shippedFloor, err = r.timeChanges(ctx, *apiChanges, floor.publishAfter(r.quietPeriod)); err != nil {
		return fmt.Errorf("floor, quiet period %v: %w", r.quietPeriod, err)
	}
	if r.quietFloor, err = r.timeChanges(ctx, *apiChanges, floor.publishAfter(0)); err != nil {
		return fmt.Errorf("floor, no quiet period: %w", err)
	}
	fmt.Printf("shipped %v quiet period: p50 %v, p99 %v; floor (plain client waiting %v, then writing the same SecretCheckSums): p50 %v, p99 %v\n",
		r.quietPeriod, pct(r.shipped, 0.5), pct(r.shipped, 0.99), r.quietPeriod, pct(r.shippedFloor, 0.5), pct(r.shippedFloor, 0.99))
	fmt.Printf("quiet period off: p50 %v, p99 %v; floor (plain client writing the same SecretCheckSums at once): p50 %v, p99 %v\n",
		pct(r.quietOff, 0.5), pct(r.quietOff, 0.99), pct(r.quietFloor, 0.5), pct(r.quietFloor, 0.99))
	return nil
}

// rows are the first publication, the shipped setting against its floor (the verdict),
// and the quiet period off against its floor, for information: no one runs it so.
func (r *apiRun) rows() []testenv.BenchRow {
	work := fmt.Sprintf("one Secret changed → new SecretCheckSum at a watcher, %s Secrets in the API server", thousands(*apiSecrets))
	rows := []testenv.BenchRow{{System: "checksum", Work: fmt.Sprintf("first publication over %s Secrets in the API server", thousands(*apiSecrets)),
		Size: *apiSecrets, Figure: "after start", Value: r.firstPublication.Seconds(), Unit: "s"}}
	shippedWork := fmt.Sprintf("%s, shipped %g s quiet period (the floor waits as long)", work, r.quietPeriod.Seconds())
	rows = append(rows, testenv.LatencyRows("checksum", shippedWork, *apiSecrets, r.shipped, r.shippedFloor)...)
	for _, row := range testenv.LatencyRows("checksum", work+", quiet period off (information)", *apiSecrets, r.quietOff, r.quietFloor) {
		row.Target, row.Pass = "", false
		rows = append(rows, row)
	}
	return rows
}

// timeChanges is the package's timeChanges from where the run's sequence has got to.
func (r *apiRun) timeChanges(ctx context.Context, count int, publish func(context.Context) error) ([]time.Duration, error) {
	lat, err := timeChanges(ctx, r.c, r.world, r.arrivals, r.changes, count, publish)
	r.changes += count
	return lat, err
}

func pct(d []time.Duration, p float64) time.Duration {
	return testenv.Percentile(d, p).Round(100 * time.Microsecond)
}

// timeChanges bumps count Secrets, one at a time, the offset-th change on of a sequence
// spread over all of them, and returns each one's time from the API server's acceptance
// to the watcher's sight of the new checksum. publish, when set, is the floor's write
// after each bump.
func timeChanges(ctx context.Context, c client.Client, world *world, arrivals *arrivals, offset, count int,
	publish func(context.Context) error) ([]time.Duration, error) {
	var latencies []time.Duration
	for i := range count {
		target := world.names[(offset+i)*7919%len(world.names)] // a prime stride: distinct Secrets across the range
		sent, err := world.bump(ctx, c, target)
		if err != nil {
			return nil, err
		}
		if publish != nil {
			if err := publish(ctx); err != nil {
				return nil, err
			}
		}
		got, err := arrivals.await(world.set.Checksum(), time.Minute)
		if err != nil {
			return nil, fmt.Errorf("change %d: %w", offset+i, err)
		}
		latencies = append(latencies, got.at.Sub(sent))
	}
	return latencies, nil
}

// floorPublisher writes what the controller writes per change — a new SecretCheckSum
// with the same labels, annotations and spec, then the delete of the previous one — with
// no controller logic: the checksum comes from the bench's own world.
type floorPublisher struct {
	c         client.Client
	namespace string
	world     *world
	previous  *tenginev1.SecretCheckSum
	template  tenginev1.SecretCheckSum
}

// adopt takes the controller's newest object as the one to replace and the model of the
// new ones.
func (f *floorPublisher) adopt(ctx context.Context) error {
	list := &tenginev1.SecretCheckSumList{}
	if err := f.c.List(ctx, list, client.InNamespace(f.namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		if f.previous == nil || f.previous.CreationTimestamp.Before(&list.Items[i].CreationTimestamp) ||
			(f.previous.CreationTimestamp.Equal(&list.Items[i].CreationTimestamp) && f.previous.Name < list.Items[i].Name) {
			f.previous = &list.Items[i]
		}
	}
	if f.previous == nil {
		return fmt.Errorf("no SecretCheckSum in %s to model the floor's on", f.namespace)
	}
	f.template = tenginev1.SecretCheckSum{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, GenerateName: f.previous.GenerateName,
		Labels: f.previous.Labels, Annotations: f.previous.Annotations}, Spec: f.previous.Spec}
	return nil
}

// publishAfter is the floor's write after each change: wait as long as the quiet period,
// then publish.
func (f *floorPublisher) publishAfter(quiet time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		if quiet > 0 {
			select {
			case <-time.After(quiet):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return f.publish(ctx)
	}
}

func (f *floorPublisher) publish(ctx context.Context) error {
	ids, sum := f.world.set.Snapshot()
	obj := f.template.DeepCopy()
	obj.Spec.Checksum, obj.Spec.Timestamp = sum, metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	if obj.Spec.IDs != nil {
		obj.Spec.IDs = ids
	}
	if err := f.c.Create(ctx, obj); err != nil {
		return err
	}
	uid := f.previous.UID
	if err := f.c.Delete(ctx, f.previous, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return err
	}
	f.previous = obj
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

// runController starts the controller in a manager of its own; stop ends it and waits.
func runController(ctx context.Context, cfg *rest.Config, opts secretchecksum.Options) (stop func(), err error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}) // one manager after another
	if err != nil {
		return nil, err
	}
	if _, err := secretchecksum.Setup(mgr, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	return func() { cancel(); <-done }, nil
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
