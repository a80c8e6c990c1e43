//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/bench/benchfloor"
	"github.com/trustplane/trustplane/test/bench/benchmetrics"
	"github.com/trustplane/trustplane/test/bench/benchprof"
)

// creators is how many goroutines create the Secrets and JWKSConfigs of a run, trustplane's
// and the floor's alike: with the manager's --jwks-workers (32 shipped) reconciling
// beside them, as many writes are in flight in both.
const creators = 32

// manyRun is one size's figures, trustplane's and its floor's.
type manyRun struct {
	n           int
	ours, floor observed
	cpu         float64 // the manager's CPU seconds during the run
	mem         int64   // the manager's peak RSS during the run above what it had in use before (RSS less heldFree)
	heldFree    int64   // free heap the manager held before the run (benchmetrics.Work.HeapHeldFree)
	peak        int64   // the manager's peak RSS during the run
}

// observed is how a run went, as the bench's watch saw it.
type observed struct {
	elapsed time.Duration // from the first create to the last JWKSConfig Ready
	created time.Duration // until the bench had created every Secret and JWKSConfig
	// latency is each JWKSConfig's time from the run's start (its first create) to its
	// Ready, as podcert's is from holding every request; fromCreate from its own create,
	// printed only. See arrivals for why the rows are not taken from fromCreate.
	latency, fromCreate []time.Duration
	// benchCPU is the bench process's CPU seconds during the run: its creators and watch.
	benchCPU float64
	// controllerCPU is the floor's controller's CPU seconds (its process), in the floor's.
	controllerCPU float64
	// sent is when the creators sent each pair, from the run's start (arrivals).
	sent arrivals
}

// arrivals are the times, from a run's start, at which its creators sent each Secret and
// JWKSConfig pair, in order. The first measured run of a size creates as fast as it can;
// every later run of that size, trustplane's or the floor's, sends each pair no sooner
// than that run did (-same-arrivals), so that both sides are offered the same load.
//
// A JWKSConfig's time from its own create to its Ready is mostly a wait in a queue, and
// near the point where the JWKSConfigs come as fast as they are served, that wait swings
// far more than the serving: unpaced, the side whose controller left the creators more
// CPU was sent its JWKSConfigs sooner, and they waited longer (at 10,000: trustplane's
// creators done in 53 s, the floor's in 63 s, a worker of either side serving one
// JWKSConfig in about 0.23 s, trustplane's p50 1.2x the floor's); paced by a first run on
// a slow minute, the floor after trustplane's run kept up and its p50 fell from 16.7 s to
// 0.6 s. So the latency rows are taken from the run's start (observed.latency): with the
// same arrivals, the time until half and until 99% are Ready is what the two sides serve,
// whether the queue grows or not. Each one's time from its own create is printed beside.
type arrivals []time.Duration

// keepArrivals makes a run's arrivals the ones every later run of its size follows,
// unless a run of that size set them already.
func (b *bench) keepArrivals(n int, sent arrivals) {
	if *sameArrivals && b.arrivals[n] == nil && len(sent) == n {
		b.arrivals[n] = sent
	}
}

// paced waits until the time the pace gives pair i, from start; a nil pace never waits.
func (a arrivals) paced(start time.Time, i int) {
	if a != nil {
		time.Sleep(time.Until(start.Add(a[i])))
	}
}

func (r manyRun) work() string {
	return fmt.Sprintf("%d JWKSConfigs created at once (nginx off)", r.n)
}

func (r manyRun) rows() []testenv.BenchRow {
	p := r.perObject()
	fmt.Printf("create %d JWKSConfigs at once (nginx off): all created after %.1fs, all Ready after %.1fs (p50 %v, p99 %v); floor all created after %.1fs, all Ready after %.1fs (p50 %v, p99 %v); ratio %.2f; manager CPU %.2f s, peak RSS %.0f MiB (+%.1f MiB during the run above what it had in use, %.1f MiB of free heap held before it); floor's controller CPU %.2f s; creators' CPU %.2f s (floor's run: %.2f s)\n",
		r.n, r.ours.created.Seconds(), r.ours.elapsed.Seconds(), pct(r.ours.latency, 0.5), pct(r.ours.latency, 0.99),
		r.floor.created.Seconds(), r.floor.elapsed.Seconds(), pct(r.floor.latency, 0.5), pct(r.floor.latency, 0.99),
		r.ours.elapsed.Seconds()/r.floor.elapsed.Seconds(), r.cpu, float64(r.peak)/(1<<20), float64(r.mem)/(1<<20), float64(r.heldFree)/(1<<20), r.floor.controllerCPU, r.ours.benchCPU, r.floor.benchCPU)
	fmt.Printf("create %d JWKSConfigs at once: from each one's own create to its Ready: p50 %v, p99 %v; floor p50 %v, p99 %v (printed only: arrivals)\n",
		r.n, pct(r.ours.fromCreate, 0.5), pct(r.ours.fromCreate, 0.99), pct(r.floor.fromCreate, 0.5), pct(r.floor.fromCreate, 0.99))
	rows := []testenv.BenchRow{testenv.FloorRow("jwks", r.work(), r.n, "all Ready", r.ours.elapsed.Seconds(), r.floor.elapsed.Seconds(), "s", testenv.MaxFloorRatio)}
	rows = append(rows, testenv.LatencyRows("jwks", r.work(), r.n, r.ours.latency, r.floor.latency)...)
	if r.n == *configs {
		rows = append(rows, testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "all Ready", Value: r.ours.elapsed.Seconds(), Unit: "s",
			Target: "< 60 s", Pass: r.ours.elapsed < time.Minute})
	}
	return append(rows,
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "time per object", Value: p.Time * 1000, Unit: "ms"},
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "CPU per object", Value: p.CPU * 1000, Unit: "ms"},
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "peak memory per object", Value: p.Memory / 1024, Unit: "KiB"})
}

// meanOf is the bursts of one size as one run: the means of their times and CPU, all
// their latencies, the highest of their peaks.
func meanOf(runs []manyRun) manyRun {
	if len(runs) == 1 {
		return runs[0]
	}
	out := manyRun{n: runs[0].n}
	ours, floors := make([]observed, len(runs)), make([]observed, len(runs))
	for i, r := range runs {
		ours[i], floors[i] = r.ours, r.floor
		out.cpu += r.cpu / float64(len(runs))
		if r.mem >= out.mem { // the highest, with the free heap its own run started with
			out.mem, out.heldFree = r.mem, r.heldFree
		}
		out.peak = max(out.peak, r.peak)
	}
	out.ours, out.floor = meanObserved(ours), meanObserved(floors)
	return out
}

// meanObserved is the mean of runs' times and CPU, with their latencies joined.
func meanObserved(runs []observed) observed {
	var out observed
	for _, r := range runs {
		out = out.plus(r)
	}
	k := float64(len(runs))
	out.elapsed, out.created = time.Duration(float64(out.elapsed)/k), time.Duration(float64(out.created)/k)
	out.benchCPU, out.controllerCPU = out.benchCPU/k, out.controllerCPU/k
	return out
}

// plus sums two runs' times and CPU and joins their latencies.
func (o observed) plus(p observed) observed {
	return observed{elapsed: o.elapsed + p.elapsed, created: o.created + p.created,
		latency:    append(append([]time.Duration{}, o.latency...), p.latency...),
		fromCreate: append(append([]time.Duration{}, o.fromCreate...), p.fromCreate...),
		benchCPU:   o.benchCPU + p.benchCPU, controllerCPU: o.controllerCPU + p.controllerCPU}
}

// ownCPU is the CPU seconds this process has used so far (user and system).
func ownCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// pct is a percentile rounded for printing.
func pct(d []time.Duration, p float64) time.Duration {
	return testenv.Percentile(d, p).Round(time.Millisecond)
}

func (r manyRun) perObject() testenv.PerObject {
	n := float64(r.n)
	return testenv.PerObject{Time: r.ours.elapsed.Seconds() / n, CPU: r.cpu / n, Memory: float64(r.mem) / n}
}

func growthRows(small, large manyRun) []testenv.BenchRow {
	work := fmt.Sprintf("JWKSConfigs created at once (nginx off), %d vs %d", large.n, small.n)
	return testenv.GrowthRows("jwks", work, large.n, small.perObject(), large.perObject())
}

// createMany creates n Secrets and JWKSConfigs (nginx off) from creators goroutines
// while m runs, and times until all are Ready, as a watch sees them.
func (b *bench) createMany(ctx context.Context, m *managerProcess, n int, ns string) (manyRun, error) {
	run := manyRun{n: n}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return run, err
	}
	requestsBefore, err := b.requestsByKind(ctx)
	if err != nil {
		return run, err
	}
	timesBefore, err := b.apiTimes(ctx)
	if err != nil {
		return run, err
	}
	before := benchmetrics.Scrape(m.metricsAddr, "jwks") // outside the CPU measured
	pid := m.cmd.Process.Pid
	resetPeakRSS(pid)
	rss, cpu := testenv.ResidentSet(pid), testenv.ProcessCPU(pid)
	if run.ours, err = b.createAndObserve(ctx, ns, n, false); err != nil {
		return run, err
	}
	run.cpu, run.peak = testenv.ProcessCPU(pid)-cpu, testenv.PeakRSS(pid)
	// The run's memory is its peak above what the manager had in use before it: free
	// heap it held then is reused first, and how much it held is chance (GC timing).
	run.heldFree = int64(before.HeapHeldFree)
	run.mem = run.peak - (rss - run.heldFree)
	if work := benchmetrics.Scrape(m.metricsAddr, "jwks").Since(before).String(); work != "" {
		fmt.Println("manager: " + work)
	}
	requestsAfter, err := b.requestsByKind(ctx)
	if err != nil {
		return run, err
	}
	printRequests(n, requestsBefore, requestsAfter)
	timesAfter, err := b.apiTimes(ctx)
	if err != nil {
		return run, err
	}
	fmt.Printf("manager's run: the API server's mean time per request: %s\n", timesAfter.meanSince(timesBefore, float64(n)/2))
	return run, nil
}

// createAndObserve creates n Secrets and JWKSConfigs in ns from creators goroutines and
// waits until a watch has seen every JWKSConfig Ready. With floor set, the floor's
// controller, a process of its own (floorproc.go), serves them.
func (b *bench) createAndObserve(ctx context.Context, ns string, n int, floor bool) (observed, error) {
	var obs observed
	w, err := newReadyWatch(ctx, b.c, ns, n)
	if err != nil {
		return obs, err
	}
	defer w.stop()
	var failed <-chan error // nil: nothing fails but the creators
	var proc *benchfloor.Process
	if floor {
		if proc, err = b.startFloor(ns, n); err != nil {
			return obs, err
		}
		defer proc.Stop()
		failed = proc.Failed()
	}
	if *apiserverProfile != "" {
		profiled := benchprof.APIServer(ctx, b.env.Config, *apiserverProfile+"."+ns, max(5*time.Second, time.Duration(n/250)*time.Second))
		defer func() {
			if err := <-profiled; err != nil {
				fmt.Println(err)
			}
		}()
	}
	pace, sent := b.arrivals[n], make(arrivals, n)
	start, cpu0 := time.Now(), ownCPU()
	created := make(chan error, 1)
	go func() {
		created <- testenv.Parallel(creators, n, func(i int) error {
			pace.paced(start, i)
			sent[i] = time.Since(start)
			return b.createPair(ctx, ns, i, b.certs[i%len(b.certs)], false, w.markCreated)
		})
	}()
	if err := w.wait(created, failed, func() { obs.created = time.Since(start) }); err != nil {
		return obs, err
	}
	obs.elapsed, obs.benchCPU = time.Since(start), ownCPU()-cpu0
	if proc != nil {
		if obs.controllerCPU, err = proc.Finish(); err != nil {
			return obs, err
		}
	}
	obs.latency, obs.fromCreate, obs.sent = w.latencies(func(string) (time.Time, bool) { return start, true }), w.latencies(w.createdAt), sent
	if pace != nil {
		fmt.Printf("%s: sent at the pace of the first run of %d (its last pair at %.1fs); the last pair sent at %.1fs\n",
			ns, n, pace[n-1].Seconds(), sent[n-1].Seconds())
	}
	return obs, nil
}

// readyWatch follows the JWKSConfigs of a namespace until n are Ready, and each one's
// time from its create to its Ready.
type readyWatch struct {
	c       client.WithWatch
	ns      string
	n       int
	w       watch.Interface
	mu      sync.Mutex
	created map[string]time.Time
	ready   map[string]time.Time
}

func newReadyWatch(ctx context.Context, c client.WithWatch, ns string, n int) (*readyWatch, error) {
	w, err := c.Watch(ctx, &jwksv1alpha1.JWKSConfigList{}, client.InNamespace(ns))
	if err != nil {
		return nil, fmt.Errorf("watching JWKSConfigs in %s: %w", ns, err)
	}
	return &readyWatch{c: c, ns: ns, n: n, w: w, created: map[string]time.Time{}, ready: map[string]time.Time{}}, nil
}

func (r *readyWatch) stop() { r.w.Stop() }

// markCreated records when the bench sent a JWKSConfig's create.
func (r *readyWatch) markCreated(name string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created[name] = at
}

// wait returns once n JWKSConfigs were seen Ready; allCreated is called when created
// reports the creators done. An error from created or failed ends it.
func (r *readyWatch) wait(created, failed <-chan error, allCreated func()) error {
	ctx := context.Background()
	deadline := time.After(15 * time.Minute)
	for r.readyCount() < r.n {
		select {
		case err := <-created:
			if err != nil {
				return err
			}
			allCreated()
		case err := <-failed:
			return err
		case ev, ok := <-r.w.ResultChan():
			if !ok { // the API server ended the watch: catch up by listing, then watch again
				if err := r.rewatch(ctx); err != nil {
					return err
				}
				continue
			}
			if cfg, ok := ev.Object.(*jwksv1alpha1.JWKSConfig); ok {
				r.see(cfg)
			}
		case <-deadline:
			return fmt.Errorf("only %d of %d JWKSConfigs in %s Ready after 15 minutes", r.readyCount(), r.n, r.ns)
		}
	}
	return nil
}

func (r *readyWatch) rewatch(ctx context.Context) error {
	w, err := catchUp(ctx, r.c, r.ns, r.see)
	if err != nil {
		return err
	}
	r.w = w
	return nil
}

// catchUp is what follows a watch the API server ended: every JWKSConfig of ns listed
// (each passed to see), and a watch from the list's version on.
func catchUp(ctx context.Context, c client.WithWatch, ns string, see func(*jwksv1alpha1.JWKSConfig)) (watch.Interface, error) {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing JWKSConfigs in %s: %w", ns, err)
	}
	for i := range list.Items {
		see(&list.Items[i])
	}
	w, err := c.Watch(ctx, &jwksv1alpha1.JWKSConfigList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, fmt.Errorf("watching JWKSConfigs in %s again: %w", ns, err)
	}
	return w, nil
}

func (r *readyWatch) see(cfg *jwksv1alpha1.JWKSConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.ready[cfg.Name]; !seen && meta.IsStatusConditionTrue(cfg.Status.Conditions, "Ready") {
		r.ready[cfg.Name] = time.Now()
	}
}

func (r *readyWatch) readyCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ready)
}

// latencies are each JWKSConfig's time from what since gives it to its Ready.
func (r *readyWatch) latencies(since func(name string) (time.Time, bool)) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Duration, 0, len(r.ready))
	for name, at := range r.ready {
		if from, ok := since(name); ok {
			out = append(out, at.Sub(from))
		}
	}
	return out
}

// createdAt is when the bench sent name's create; r.mu is held (latencies).
func (r *readyWatch) createdAt(name string) (time.Time, bool) {
	at, ok := r.created[name]
	return at, ok
}

// requestsByKind counts the API server's requests so far by verb and resource
// (subresource too), watches and the API server's own requests left out.
func (b *bench) requestsByKind(ctx context.Context) (map[string]int, error) {
	return testenv.APIRequestsBy(ctx, b.env.Config, requestKind)
}

// requestKind is the verb and resource (subresource too) of a series of the API
// server's request metrics; "" for watches and the API server's own requests.
func requestKind(labels string) string {
	fields := map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			fields[k] = strings.Trim(v, `"`)
		}
	}
	if fields["verb"] == "WATCH" || fields["resource"] == "" {
		return ""
	}
	kind := fields["verb"] + " " + fields["resource"]
	if fields["subresource"] != "" {
		kind += "/" + fields["subresource"]
	}
	return kind
}

// apiTimes is the API server's time spent on requests so far, and their number, by
// kind (requestKind): the sum and count of apiserver_request_duration_seconds.
type apiTimes struct{ seconds, count map[string]float64 }

func (b *bench) apiTimes(ctx context.Context) (apiTimes, error) {
	seconds, err := testenv.APIMetricBy(ctx, b.env.Config, "apiserver_request_duration_seconds_sum", requestKind)
	if err != nil {
		return apiTimes{}, err
	}
	count, err := testenv.APIMetricBy(ctx, b.env.Config, "apiserver_request_duration_seconds_count", requestKind)
	return apiTimes{seconds: seconds, count: count}, err
}

// meanSince is the mean time the API server took for each kind of request made since
// before, in milliseconds, for the kinds of which at least minCount were made.
func (t apiTimes) meanSince(before apiTimes, minCount float64) string {
	var parts []string
	for kind, c := range t.count {
		n := c - before.count[kind]
		if n < minCount {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f ms", kind, 1000*(t.seconds[kind]-before.seconds[kind])/n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// printRequests prints the API requests of a run per JWKSConfig, by verb and resource:
// the bench's own (a Secret and a JWKSConfig created) and the manager's.
func printRequests(n int, before, after map[string]int) {
	var kinds []string
	for kind, v := range after {
		if v > before[kind] {
			kinds = append(kinds, kind)
		}
	}
	sort.Strings(kinds)
	var parts []string
	total := 0
	for _, kind := range kinds {
		d := after[kind] - before[kind]
		total += d
		parts = append(parts, fmt.Sprintf("%s %.2f", kind, float64(d)/float64(n)))
	}
	fmt.Printf("API requests per JWKSConfig (the bench's two creates included): %.2f: %s\n", float64(total)/float64(n), strings.Join(parts, ", "))
}

// floor is what n JWKSConfigs at once amount to with no controller: the same creators
// create each TLS Secret and JWKSConfig as createMany does, and as many goroutines as the
// manager has workers (--jwks-workers) do what any controller must for each, as a watch
// shows it created: read its Secret, turn the certificate into the JWK Set document, and
// write the ConfigMap and the status trustplane writes (publishPlain). So as many writes
// are in flight as under the manager (creators + workers), and they are the same writes.
// The floor's controller has a connection of its own and watches what any controller
// must (dependents), as the manager does. It is timed by the same watch; its objects are
// deleted afterwards.
func (b *bench) floor(ctx context.Context, n int, ns string) (observed, error) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return observed{}, err
	}
	timesBefore, err := b.apiTimes(ctx)
	if err != nil {
		return observed{}, err
	}
	obs, err := b.createAndObserve(ctx, ns, n, true)
	if err != nil {
		return obs, fmt.Errorf("floor: %w", err)
	}
	fmt.Printf("floor: %d Secrets and JWKSConfigs by %d goroutines, Secret reads, ConfigMaps and Ready statuses by %d, by a plain client: all created after %.1fs, all Ready after %.1fs\n",
		n, creators, *workers, obs.created.Seconds(), obs.elapsed.Seconds())
	timesAfter, err := b.apiTimes(ctx)
	if err != nil {
		return obs, err
	}
	fmt.Printf("floor's run: the API server's mean time per request: %s\n", timesAfter.meanSince(timesBefore, float64(n)/2))
	if err := b.deleteRun(ctx, ns); err != nil {
		return obs, fmt.Errorf("floor: %w", err)
	}
	return obs, nil
}

// deleteRun deletes the JWKSConfigs, ConfigMaps and Secrets of a run's namespace, with
// no manager running.
func (b *bench) deleteRun(ctx context.Context, ns string) error {
	for _, list := range []client.Object{&jwksv1alpha1.JWKSConfig{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		if err := b.c.DeleteAllOf(ctx, list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("deleting the objects of %s: %w", ns, err)
		}
	}
	return nil
}

// resetPeakRSS sets a process's VmHWM back to its resident set now (proc(5), clear_refs 5),
// so that the peak of one run is read apart from what came before it.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o600)
}
