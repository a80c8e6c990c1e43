//go:build bench

// Command jwks is `make bench-jwks`: it runs the real `trustplane manager` binary (jwks
// controller only) against a real kube-apiserver + etcd and prints
//
//  1. Secret update → ConfigMap updated latency over 100 rotations (p50, p99);
//  2. 1,000 and 10,000 JWKSConfigs (nginx off) created at once, each with its Secret
//     (1,000 three times over, -bursts): time until all are Ready and each one's time
//     from the run's start to its Ready (p50, p99; from its own create too, printed),
//     against the floor (many.go: the same Secrets
//     and JWKSConfigs created by the same 32 goroutines while as many goroutines as the
//     manager has workers take each from a watch, read its Secret, turn it into the
//     document and write the ConfigMap and status the controller writes for it, with no
//     manager running, just before or just after each burst, alternately; the first run
//     of a size creates as fast as it can, and every later one sends each pair no sooner
//     than it did, so that both sides are offered the same load: many.go, arrivals); the
//     manager's CPU and peak memory per JWKSConfig, and how they grow from 1x to 10x;
//  3. a full resync of the 1x sets (a manager restart) with nothing changed: the API
//     writes it makes, counted by the API server's own request metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	jwksctrl "github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/bench/benchprof"
)

var (
	rotations        = flag.Int("rotations", 100, "Secret rotations to time.")
	configs          = flag.Int("configs", 1000, "JWKSConfigs to create at once at 1x.")
	bursts           = flag.Int("bursts", 3, "Bursts of -configs JWKSConfigs at 1x, each next to a floor of its own: one burst of a thousand lasts seconds, and its p50 swings with the machine.")
	growth           = flag.Int("growth", testenv.BenchGrowth(10), "The second size is this many times -configs (1: one size only; $"+testenv.BenchScalesEnv+"=1 makes 1 the default).")
	workers          = flag.Int("workers", jwksctrl.DefaultOptions().Workers, "Concurrent JWKSConfig reconciles (--jwks-workers).")
	apiserverProfile = flag.String("apiserver-cpuprofile", "", "Write the API server's CPU profile of each create-at-once run (the floor's and trustplane's, the first n/250 seconds, at least 5) to this path with the namespace appended.")
	sameArrivals     = flag.Bool("same-arrivals", true, "Send every later run's JWKSConfigs of a size no sooner than the first run of that size sent them (arrivals), so that both sides are offered the same load.")
	profile          = flag.String("cpuprofile", "", "Write each manager process's CPU profile to this path with .1, .2, ... appended, in the order they start (go tool pprof -top <file>).")
)

func main() {
	flag.Parse()
	ctrl.SetLogger(logr.Discard()) // the rollout stand-in's controller logs nothing worth reading
	if *floorNamespace != "" {
		if err := runFloorController(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-jwks floor controller:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-jwks:", err)
		os.Exit(1)
	}
}

type bench struct {
	env        *testenv.Env
	c          client.WithWatch
	kubeconfig string
	binary     string
	prof       *benchprof.Profiler
	certs      []testcerts.Chain // a pool: parsing, not key generation, is measured
	// arrivals are the first measured run's of each size (many.go), which later runs follow.
	arrivals map[int]arrivals
}

func run() error {
	ctx := context.Background()
	tb, err := testenv.StartBench("bench-jwks")
	if err != nil {
		return err
	}
	defer tb.Close()
	env := tb.Env
	// Rate-limited as little as the manager's client (controller-runtime's GetConfig turns
	// client-side rate limiting off): the floor and the objects of every run go through it.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	b := &bench{env: env, c: c, kubeconfig: tb.Kubeconfig, binary: tb.Binary, arrivals: map[int]arrivals{}}
	if b.prof, err = benchprof.Build(tb.Binary, *profile); err != nil {
		return err
	}
	for range 16 {
		key, _ := testcerts.NewKey(testcerts.P256)
		chain, err := testcerts.NewChain(key, "bench", time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour))
		if err != nil {
			return err
		}
		b.certs = append(b.certs, chain)
	}
	fmt.Printf("bench-jwks: real kube-apiserver + etcd, trustplane manager binary, %d CPUs\n", numCPU())
	sizes := []int{*configs}
	if *growth > 1 {
		sizes = append(sizes, *configs**growth)
	}
	// No kube-controller-manager or kubelet: a stand-in rolls the nginx Deployments out,
	// so that Ready (which waits for them) means what it means in a cluster.
	rollout, err := testenv.RolloutStandIn(env.Config, jwksv1alpha1.OwnerLabel)
	if err != nil {
		return err
	}
	rolloutCtx, stopRollout := context.WithCancel(ctx)
	defer stopRollout()
	go func() { _ = rollout.Start(rolloutCtx) }()

	// A fresh API server and etcd are slower at first: whichever side ran first was
	// measured on them. A floor's run, not measured, warms them up.
	if _, err := b.floor(ctx, *configs, "warm-up"); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	mgr, err := b.startManager()
	if err != nil {
		return err
	}
	rows, err := b.rotationLatency(ctx)
	mgr.stop()
	if err != nil {
		return err
	}
	first, err := b.bursts(ctx, sizes[0], *rotations, *bursts, true)
	if err != nil {
		return err
	}
	rows = append(rows, first.rows()...)
	rows = append(rows, testenv.BenchRow{System: "jwks", Work: first.work(), Size: first.n, Figure: "manager peak RSS",
		Value: float64(first.peak) / (1 << 20), Unit: "MiB", Target: "< 300 MiB", Pass: first.peak < 300<<20})

	existing := sizes[0]**bursts + *rotations
	mgr, resync, err := b.resyncWrites(ctx, existing)
	if err != nil {
		return err
	}
	mgr.stop()
	rows = append(rows, resync)
	if len(sizes) > 1 {
		second, err := b.bursts(ctx, sizes[1], existing, 1, false)
		if err != nil {
			fmt.Printf("create %d JWKSConfigs at once did not complete (%v); the largest size measured is %d\n", sizes[1], err, sizes[0])
		} else {
			rows = append(rows, second.rows()...)
			rows = append(rows, growthRows(first, second)...)
		}
	}
	return testenv.RecordBench(rows...)
}

// bursts times k bursts of n JWKSConfigs created at once, each under a manager that has
// first reconciled the existing ones, and as many floors of n, each just before or just
// after its burst: testenv.FloorFirst says which for the first, and the next ones
// alternate. A single burst (the 10x size) has a floor on both sides instead, and their
// mean is its floor: whichever side runs second runs on an etcd and a watch cache that
// the first one's objects have grown, and at that size the order alone moved the ratio
// by 0.3. Each side is timed with the other not running: a manager would reconcile the
// floor's JWKSConfigs. The floor's objects are deleted after it; trustplane's stay (the
// later runs count them as existing) unless keep is false, and are then deleted before a
// floor that follows them, as the floor's are before trustplane's run. The figures are
// the bursts' means (latencies: all of them; memory: the highest peak).
func (b *bench) bursts(ctx context.Context, n, existing, k int, keep bool) (manyRun, error) {
	runs := make([]manyRun, 0, k)
	for i := range k {
		floorFirst := testenv.FloorFirst() == (i%2 == 0)
		floorSecond := !floorFirst || k == 1
		name := fmt.Sprintf("%d", n)
		if k > 1 {
			name = fmt.Sprintf("%d-%d", n, i+1)
		}
		var floors []observed
		if floorFirst || k == 1 {
			floor, err := b.floor(ctx, n, "floor-"+name)
			if err != nil {
				return manyRun{}, err
			}
			b.keepArrivals(n, floor.sent)
			floors = append(floors, floor)
		}
		run, err := b.managedRun(ctx, n, existing, "many-"+name)
		if err != nil {
			return run, err
		}
		b.keepArrivals(n, run.ours.sent)
		existing += n
		if floorSecond {
			if !keep {
				if err := b.deleteRun(ctx, "many-"+name); err != nil {
					return run, err
				}
			}
			floor, err := b.floor(ctx, n, "floor-"+name+"-after")
			if err != nil {
				return run, err
			}
			floors = append(floors, floor)
		}
		run.floor = meanObserved(floors)
		if k == 1 {
			fmt.Printf("floor before and after: all Ready after %.1fs and %.1fs, p50 %v and %v\n",
				floors[0].elapsed.Seconds(), floors[1].elapsed.Seconds(), pct(floors[0].latency, 0.5), pct(floors[1].latency, 0.5))
		} else {
			fmt.Printf("burst %d of %d (the floor %s): all Ready after %.1fs, p50 %v; floor all Ready after %.1fs, p50 %v\n", i+1, k,
				map[bool]string{true: "first", false: "second"}[floorFirst], run.ours.elapsed.Seconds(), pct(run.ours.latency, 0.5), run.floor.elapsed.Seconds(), pct(run.floor.latency, 0.5))
		}
		runs = append(runs, run)
	}
	return meanOf(runs), nil
}

// managedRun is createMany under a manager started for it, once it has reconciled the
// existing JWKSConfigs.
func (b *bench) managedRun(ctx context.Context, n, existing int, ns string) (manyRun, error) {
	mgr, err := b.startManager()
	if err != nil {
		return manyRun{}, err
	}
	defer mgr.stop()
	if err := mgr.waitReconciles(existing); err != nil {
		return manyRun{}, err
	}
	return b.createMany(ctx, mgr, n, ns)
}

// rotationLatency creates N sets, then rotates each Secret once and times how long the
// new key takes to reach the ConfigMap, observed through a watch.
func (b *bench) rotationLatency(ctx context.Context) ([]testenv.BenchRow, error) {
	ns := "bench-rotation"
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	for i := range *rotations {
		if err := b.createPair(ctx, ns, i, b.certs[0], true, nil); err != nil {
			return nil, err
		}
	}
	if err := b.waitAllReady(ctx, ns, *rotations); err != nil {
		return nil, err
	}
	cs := kubernetes.NewForConfigOrDie(b.env.Config)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var latencies []time.Duration
	for i := range *rotations {
		chain := b.certs[1+i%(len(b.certs)-1)]
		key, _ := jwkset.ParseChain(chain.PEM(), "", time.Now())
		start := time.Now()
		if err := b.putSecret(ctx, ns, i, chain); err != nil {
			return nil, err
		}
		if err := waitForKid(w, fmt.Sprintf("set-%d-jwks", i), key.KeyID()); err != nil {
			return nil, err
		}
		latencies = append(latencies, time.Since(start))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1)+0.5)] }
	fmt.Printf("secret update → ConfigMap updated, %d rotations: p50 %v, p99 %v, max %v (target p99 < 1s)\n",
		len(latencies), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	work := fmt.Sprintf("%d Secret rotations, one at a time (nginx on)", len(latencies))
	return []testenv.BenchRow{
		{System: "jwks", Work: work, Size: len(latencies), Figure: "Secret → ConfigMap p50", Value: float64(pct(0.50).Microseconds()) / 1000, Unit: "ms"},
		{System: "jwks", Work: work, Size: len(latencies), Figure: "Secret → ConfigMap p99", Value: float64(pct(0.99).Microseconds()) / 1000, Unit: "ms",
			Target: "p99 < 1 s", Pass: pct(0.99) < time.Second},
	}, nil
}

func waitForKid(w watch.Interface, name, kid string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == name && strings.Contains(cm.Data[jwkset.DocumentKey], `"kid":"`+kid+`"`) {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("%s never got kid %s", name, kid)
		}
	}
}

// resyncWrites restarts the manager over the n published sets and counts the mutating
// requests the API server receives for the controller's resources until it has
// reconciled them all; the manager is left running.
func (b *bench) resyncWrites(ctx context.Context, n int) (*managerProcess, testenv.BenchRow, error) {
	var row testenv.BenchRow
	before, err := b.controllerWrites(ctx)
	if err != nil {
		return nil, row, err
	}
	mgr, err := b.startManager()
	if err != nil {
		return nil, row, err
	}
	// The restarted manager reconciles every JWKSConfig once; wait for its queue to drain.
	if err := mgr.waitReconciles(n); err != nil {
		mgr.stop()
		return nil, row, err
	}
	after, err := b.controllerWrites(ctx)
	if err != nil {
		mgr.stop()
		return nil, row, err
	}
	fmt.Printf("full resync of %d JWKSConfigs with nothing changed: %d API writes (target 0; %d counted before it)\n", n, after-before, before)
	row = testenv.BenchRow{System: "jwks", Work: fmt.Sprintf("full resync of %d unchanged JWKSConfigs (manager restart)", n), Size: n,
		Figure: "API writes", Value: float64(after - before), Unit: "writes", Target: "0 writes", Pass: after == before}
	return mgr, row, nil
}

// createPair creates a TLS Secret and a JWKSConfig publishing it, with or without nginx,
// and returns the JWKSConfig; mark, when set, is told when the JWKSConfig's create was
// sent (its latency starts there).
func (b *bench) createPair(ctx context.Context, ns string, i int, chain testcerts.Chain, nginx bool, mark func(string, time.Time)) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tls-%d", i)}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
	if err := b.c.Create(ctx, s); err != nil {
		return err
	}
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("set-%d", i)},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: s.Name}}
	if !nginx {
		cfg.Spec.Nginx.Enabled = ptr.To(false)
	}
	if mark != nil {
		mark(cfg.Name, time.Now())
	}
	return b.c.Create(ctx, cfg)
}

func (b *bench) putSecret(ctx context.Context, ns string, i int, chain testcerts.Chain) error {
	s := &corev1.Secret{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("tls-%d", i)}, s); err != nil {
		return err
	}
	s.Data = map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
	return b.c.Update(ctx, s)
}

func (b *bench) waitAllReady(ctx context.Context, ns string, n int) error {
	start := time.Now()
	for time.Since(start) < 10*time.Minute {
		list := &jwksv1alpha1.JWKSConfigList{}
		if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, "Ready") {
				ready++
			}
		}
		if ready == n {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not all %d JWKSConfigs in %s became Ready", n, ns)
}

// controllerWrites counts writes to the resources the jwks controller writes, as the API
// server reports them.
func (b *bench) controllerWrites(ctx context.Context) (int, error) {
	return testenv.APIRequests(ctx, b.env.Config, func(labels string) bool {
		return containsAny(labels, `verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="APPLY"`, `verb="DELETE"`) &&
			containsAny(labels, `resource="jwksconfigs"`, `resource="configmaps"`, `resource="deployments"`, `resource="services"`, `resource="pods"`)
	})
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

type managerProcess struct {
	cmd         *exec.Cmd
	metricsAddr string
}

func (b *bench) startManager() (*managerProcess, error) {
	metrics, probes := testenv.BenchAddr(), testenv.BenchAddr()
	cmd := exec.Command(b.binary, "manager", "--kubeconfig", b.kubeconfig, "--controllers", "jwks",
		"--leader-elect=false", "--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
		"--jwks-server-bind-address", "0", "--jwks-workers", strconv.Itoa(*workers))
	logs, err := os.Create(filepath.Join(filepath.Dir(b.binary), "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive the bench
	cmd.Stderr = logs                                                  // shutdown cancels in-flight reconciles; their errors are not results
	if entry, file := b.prof.Env(); entry != "" {
		cmd.Env = append(os.Environ(), entry)
		fmt.Printf("manager CPU profile: %s\n", file)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &managerProcess{cmd: cmd, metricsAddr: metrics}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out, err := exec.Command("curl", "-sf", "http://"+probes+"/readyz").Output(); err == nil && string(out) == "ok" {
			return m, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("manager did not become ready")
}

// waitReconciles waits until the controller has finished n reconciles and its queue is empty.
func (m *managerProcess) waitReconciles(n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		out, err := exec.Command("curl", "-sf", "http://"+m.metricsAddr+"/metrics").Output()
		if err == nil {
			done, depth := 0.0, -1.0
			for _, line := range strings.Split(string(out), "\n") {
				switch {
				case strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="jwks",result="success"}`),
					strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="jwks",result="requeue_after"}`):
					v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
					done += v
				case strings.HasPrefix(line, `workqueue_depth{controller="jwks",name="jwks"`):
					v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
					depth = max(depth, 0) + v
				}
			}
			if int(done) >= n && depth == 0 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the restarted manager did not finish %d reconciles", n)
}

func (m *managerProcess) stop() {
	_ = m.cmd.Process.Signal(os.Interrupt)
	_ = m.cmd.Wait()
}

func numCPU() int {
	out, _ := exec.Command("nproc").Output()
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
