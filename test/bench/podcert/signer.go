//go:build bench

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/bench/benchprof"
)

// podsPerNamespace are the live pods the requests of one namespace name, in turn.
const podsPerNamespace = 50

// signerBench measures the signer at 1x and 10x. Each size runs in its own namespaces:
// a floor, the signer and a floor again, each over its own requests, all created before it
// starts (throughput, not arrival rate, is measured); a size's requests are deleted after
// it, so that the next manager does not list them. The 1x size runs -bursts times over,
// its figures joined: one lasts seconds.
type signerBench struct {
	tb   *testenv.Bench
	prof *benchprof.Profiler
	c    client.WithWatch
	node *corev1.Node
	// idle is the manager's CPU seconds and peak RSS from start to ready with no request:
	// what every run's figures are taken above.
	idleCPU float64
	idleRSS int64
}

// signerRun is one size's figures.
type signerRun struct {
	n              int
	floor, elapsed time.Duration
	// Each request's time from the moment the signer holds every request (the manager:
	// ready, its caches filled by their initial lists; the floor: its list answered) to a
	// watch seeing it issued. The manager's process start is not a request's cost: the
	// requests exist before it starts only so that a burst is measured (startUp tells it).
	latency, floorLatency []time.Duration
	// startUp is from the manager's start to the first request the watch sees issued: the
	// process, its caches' initial lists, the CA read; readyAfter, to its /readyz.
	startUp, readyAfter time.Duration
	cpu                 float64 // the manager's CPU seconds above idle
	mem                 int64   // the manager's peak RSS above idle
}

func runSigner() error {
	ctx := context.Background()
	tb, err := testenv.StartBench("bench-podcert")
	if err != nil {
		return err
	}
	defer tb.Close()
	// The floor's client is rate-limited as little as the manager's (controller-runtime's
	// GetConfig turns client-side rate limiting off).
	cfg := rest.CopyConfig(tb.Env.Config)
	cfg.QPS = -1
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	b := &signerBench{tb: tb, c: c, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	if b.prof, err = benchprof.Build(tb.Binary, *profile); err != nil {
		return err
	}
	if err := c.Create(ctx, b.node); err != nil {
		return err
	}
	if err := b.idle(ctx); err != nil {
		return err
	}
	// A fresh API server and etcd are slower at first: whichever side ran first was
	// measured on them (the floor went from 2.9 s to 1.9 s for the same 2,000 requests
	// when it went second). A floor's run, not measured, warms them up.
	if _, _, err := b.floor(ctx, "warm-up", *requests); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	sizes := []int{*requests}
	if *growth > 1 {
		sizes = append(sizes, *requests**growth)
	}
	var rows []testenv.BenchRow
	var runs []signerRun
	for i, n := range sizes {
		k := 1
		if i == 0 {
			k = max(*bursts, 1)
		}
		run, err := b.bursts(ctx, n, k)
		if err != nil {
			if len(runs) == 0 {
				return err
			}
			fmt.Printf("signer: %d requests did not complete (%v); the largest size measured is %d\n", n, err, runs[len(runs)-1].n)
			break
		}
		runs = append(runs, run)
		rows = append(rows, run.rows()...)
	}
	if len(runs) == 2 {
		rows = append(rows, growthRows(runs[0], runs[1])...)
	}
	return testenv.RecordBench(rows...)
}

func (r signerRun) work() string {
	return fmt.Sprintf("%d PodCertificateRequests issued (ECDSA P-256, %d workers)", r.n, *workers)
}

func (r signerRun) rows() []testenv.BenchRow {
	ratio := r.elapsed.Seconds() / r.floor.Seconds()
	rate := float64(r.n) / r.elapsed.Seconds()
	fmt.Printf("signer: %d PodCertificateRequests issued in %.2f s with %d workers, from the manager ready (from its start: %.2f s to ready, %.2f s to the first issued): %.0f PCR/s; floor %.2f s (%.0f PCR/s), ratio %.2f; manager CPU %.2f s, peak RSS +%.1f MiB above idle\n",
		r.n, r.elapsed.Seconds(), *workers, r.readyAfter.Seconds(), r.startUp.Seconds(), rate, r.floor.Seconds(), float64(r.n)/r.floor.Seconds(), ratio, r.cpu, float64(r.mem)/(1<<20))
	fmt.Printf("signer: time to each issued, from holding every request: p50 %v, p99 %v; floor p50 %v, p99 %v\n",
		pct(r.latency, 0.5), pct(r.latency, 0.99), pct(r.floorLatency, 0.5), pct(r.floorLatency, 0.99))
	rows := []testenv.BenchRow{testenv.FloorRow("podcert", r.work(), r.n, "all issued", r.elapsed.Seconds(), r.floor.Seconds(), "s", testenv.MaxFloorRatio)}
	rows = append(rows, testenv.LatencyRows("podcert", r.work(), r.n, r.latency, r.floorLatency)...)
	return append(rows, []testenv.BenchRow{
		{System: "podcert", Work: r.work(), Size: r.n, Figure: "throughput", Value: rate, Unit: "PCR/s",
			Floor: testenv.Ptr(float64(r.n) / r.floor.Seconds()), Target: ">= 300/s", Pass: rate >= 300},
		{System: "podcert", Work: r.work(), Size: r.n, Figure: "time per object", Value: r.perObject().Time * 1000, Unit: "ms"},
		{System: "podcert", Work: r.work(), Size: r.n, Figure: "CPU per object", Value: r.perObject().CPU * 1000, Unit: "ms"},
		{System: "podcert", Work: r.work(), Size: r.n, Figure: "peak memory per object", Value: r.perObject().Memory / 1024, Unit: "KiB"},
	}...)
}

// pct is a percentile rounded for printing.
func pct(d []time.Duration, p float64) time.Duration {
	return testenv.Percentile(d, p).Round(time.Millisecond)
}

func (r signerRun) perObject() testenv.PerObject {
	n := float64(r.n)
	return testenv.PerObject{Time: r.elapsed.Seconds() / n, CPU: r.cpu / n, Memory: float64(r.mem) / n}
}

func growthRows(small, large signerRun) []testenv.BenchRow {
	work := fmt.Sprintf("PodCertificateRequests issued, %d vs %d", large.n, small.n)
	return testenv.GrowthRows("podcert", work, large.n, small.perObject(), large.perObject())
}

// idle starts the manager with no request, waits until it is ready and has made its CA
// (so that no measured run bootstraps one), and records its CPU and peak RSS.
func (b *signerBench) idle(ctx context.Context) error {
	m, err := b.startManager()
	if err != nil {
		return err
	}
	defer m.stop()
	if err := m.waitReady(); err != nil {
		return err
	}
	opts := podcertsigner.DefaultOptions()
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := b.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: opts.CASecretName}, &corev1.Secret{})
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("the signer made no CA Secret: %w", err)
		}
	}
	time.Sleep(time.Second) // the bundle applied, the queue empty
	b.idleCPU, b.idleRSS = testenv.ProcessCPU(m.cmd.Process.Pid), testenv.PeakRSS(m.cmd.Process.Pid)
	fmt.Printf("signer: idle manager (CA made, no request): CPU %.2f s, peak RSS %.1f MiB\n", b.idleCPU, float64(b.idleRSS)/(1<<20))
	return nil
}

// bursts measures k runs of n requests and joins them (meanOf).
func (b *signerBench) bursts(ctx context.Context, n, k int) (signerRun, error) {
	runs := make([]signerRun, 0, k)
	for i := range k {
		name := fmt.Sprintf("%d", n)
		if k > 1 {
			name = fmt.Sprintf("%d-%d", n, i+1)
		}
		run, err := b.run(ctx, n, name)
		if err != nil {
			return run, err
		}
		if k > 1 {
			fmt.Printf("signer: burst %d of %d: all issued after %.2f s, p50 %v; floor %.2f s, p50 %v\n", i+1, k,
				run.elapsed.Seconds(), pct(run.latency, 0.5), run.floor.Seconds(), pct(run.floorLatency, 0.5))
		}
		runs = append(runs, run)
	}
	return meanOf(runs), nil
}

// meanOf is the bursts of one size as one run: the means of their times and CPU, all
// their latencies, the highest of their peaks.
func meanOf(runs []signerRun) signerRun {
	out := signerRun{n: runs[0].n}
	k := time.Duration(len(runs))
	for _, r := range runs {
		out.elapsed += r.elapsed / k
		out.floor += r.floor / k
		out.startUp += r.startUp / k
		out.readyAfter += r.readyAfter / k
		out.cpu += r.cpu / float64(len(runs))
		out.mem = max(out.mem, r.mem)
		out.latency = append(out.latency, r.latency...)
		out.floorLatency = append(out.floorLatency, r.floorLatency...)
	}
	return out
}

// run measures one size: a floor, the signer, and a floor again; the floor's figures
// are the two floors' mean (their latencies joined). Each run leaves the API server and
// etcd with more behind them (deleted requests stay in etcd's history until compaction),
// so a floor on one side only was measured on another server state than the signer; with
// one on each side their mean is measured, on average, on the signer's.
func (b *signerBench) run(ctx context.Context, n int, name string) (signerRun, error) {
	run := signerRun{n: n}
	before, beforeLatency, err := b.floor(ctx, "floor-"+name, n)
	if err != nil {
		return run, err
	}
	if err := b.sign(ctx, &run, "signer-"+name); err != nil {
		return run, err
	}
	after, afterLatency, err := b.floor(ctx, "floor-"+name+"-after", n)
	if err != nil {
		return run, err
	}
	fmt.Printf("signer: floor of %d requests before and after the signer: %.2f s and %.2f s\n", n, before.Seconds(), after.Seconds())
	run.floor = (before + after) / 2
	run.floorLatency = append(beforeLatency, afterLatency...)
	return run, nil
}

// sign creates run.n requests in a namespace of their own, starts the manager, and times
// it until a watch has seen them all issued.
func (b *signerBench) sign(ctx context.Context, run *signerRun, ns string) error {
	sa, pods, err := b.namespace(ctx, ns)
	if err != nil {
		return err
	}
	if err := b.createRequests(ctx, ns, sa, pods, run.n); err != nil {
		return err
	}
	w, stopWatch, err := watchIssued(ctx, b.c, ns)
	if err != nil {
		return err
	}
	defer stopWatch()
	m, err := b.startManager()
	if err != nil {
		return err
	}
	launched := time.Now()
	ready, err := m.readyAt()
	if err != nil {
		m.stop()
		return err
	}
	run.readyAfter = ready.Sub(launched)
	if run.startUp, err = m.waitIssued(w, run.n, launched); err != nil {
		m.stop()
		return err
	}
	run.latency, run.elapsed = w.since(ready)
	run.cpu = testenv.ProcessCPU(m.cmd.Process.Pid) - b.idleCPU
	run.mem = testenv.PeakRSS(m.cmd.Process.Pid) - b.idleRSS
	m.stop()
	return b.c.DeleteAllOf(ctx, &certificatesv1.PodCertificateRequest{}, client.InNamespace(ns))
}

// waitIssued waits until the watch has seen n requests issued, failing on the first it
// sees denied or failed; it returns the time from start to the first issued.
func (m *managerProcess) waitIssued(w *issuedWatch, n int, start time.Time) (startUp time.Duration, err error) {
	if err := w.wait(n, 15*time.Minute); err != nil {
		return 0, fmt.Errorf("%w (see %s)", err, m.log)
	}
	return w.first().Sub(start), nil
}

// floor times what any signer must do for n requests, with no controller: learn of them
// (one list: they all exist before it starts, as they do before the manager starts) and
// keep watching them, then,
// from as many goroutines as the signer has workers, check each one's proof, sign its
// certificate with a CA of the floor's own, and write its issued status, until a watch has
// seen them all issued; it returns that time and each one's.
func (b *signerBench) floor(ctx context.Context, ns string, n int) (time.Duration, []time.Duration, error) {
	sa, pods, err := b.namespace(ctx, ns)
	if err != nil {
		return 0, nil, err
	}
	if err := b.createRequests(ctx, ns, sa, pods, n); err != nil {
		return 0, nil, err
	}
	sign, err := plainSigner()
	if err != nil {
		return 0, nil, err
	}
	w, stopWatch, err := watchIssued(ctx, b.c, ns)
	if err != nil {
		return 0, nil, err
	}
	defer stopWatch()
	// The watch any signer keeps on its requests, to learn of new ones: it also brings
	// back each status the floor writes, as the manager's informer gets each of its own.
	watchCtx, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	go testenv.DrainWatch(watchCtx, b.c, &certificatesv1.PodCertificateRequestList{}, ns)
	list := &certificatesv1.PodCertificateRequestList{}
	if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, nil, fmt.Errorf("floor: %w", err)
	}
	start := time.Now() // every request in hand, as the manager once ready
	if err := testenv.Parallel(*workers, len(list.Items), func(i int) error {
		pcr := &list.Items[i]
		if err := sign(pcr); err != nil {
			return err
		}
		return b.c.Status().Update(ctx, pcr)
	}); err != nil {
		return 0, nil, fmt.Errorf("floor: %w", err)
	}
	if err := w.wait(n, 5*time.Minute); err != nil {
		return 0, nil, fmt.Errorf("floor: %w", err)
	}
	latency, elapsed := w.since(start)
	return elapsed, latency, b.c.DeleteAllOf(ctx, &certificatesv1.PodCertificateRequest{}, client.InNamespace(ns))
}

// plainSigner signs a request with a CA of the floor's own, made before the floor is
// timed, and sets its issued status: podcertsigner.Sign, the signer's own pure function
// (the proof checked, the certificate made), with no cache, lock or rotation around it.
func plainSigner() (func(*certificatesv1.PodCertificateRequest) error, error) {
	now := time.Now()
	entry, err := podcert.NewCA("bench floor CA", now.Add(-time.Hour), 24*time.Hour*365)
	if err != nil {
		return nil, err
	}
	ca := &podcertsigner.CA{Cert: entry.Cert, Key: entry.Key}
	opts := podcertsigner.DefaultOptions()
	policy := podcertsigner.Policy{MaxLifetime: opts.MaxLifetime, TrustDomain: opts.TrustDomain}
	return func(pcr *certificatesv1.PodCertificateRequest) error {
		issued, err := podcertsigner.Sign(ca, podcertsigner.RequestOf(pcr), policy, now)
		if err != nil {
			return err
		}
		pcr.Status.CertificateChain = issued.Chain
		pcr.Status.NotBefore = &metav1.Time{Time: issued.NotBefore}
		pcr.Status.BeginRefreshAt = &metav1.Time{Time: issued.BeginRefreshAt}
		pcr.Status.NotAfter = &metav1.Time{Time: issued.NotAfter}
		pcr.Status.Conditions = append(pcr.Status.Conditions, metav1.Condition{
			Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: certificatesv1.PodCertificateRequestConditionTypeIssued, Message: "issued by the floor", LastTransitionTime: metav1.NewTime(now), ObservedGeneration: pcr.Generation,
		})
		return nil
	}, nil
}

// namespace makes ns with a ServiceAccount and the pods requests name, bound to the node.
func (b *signerBench) namespace(ctx context.Context, ns string) (*corev1.ServiceAccount, []*corev1.Pod, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, sa} {
		if err := b.c.Create(ctx, o); err != nil {
			return nil, nil, err
		}
	}
	pods := make([]*corev1.Pod, podsPerNamespace)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.PodSpec{NodeName: b.node.Name, ServiceAccountName: sa.Name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if err := b.c.Create(ctx, pods[i]); err != nil {
			return nil, nil, err
		}
	}
	return sa, pods, nil
}

// createRequests creates n requests for the signer from 16 goroutines, as node agents would.
func (b *signerBench) createRequests(ctx context.Context, ns string, sa *corev1.ServiceAccount, pods []*corev1.Pod, n int) error {
	signer := podcertsigner.DefaultOptions().SignerName
	return testenv.Parallel(16, n, func(i int) error {
		pod := pods[i%len(pods)]
		_, proof, err := podcert.GenerateKeyAndProof("ECDSAP256")
		if err != nil {
			return err
		}
		return b.c.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "req-"},
			Spec: certificatesv1.PodCertificateRequestSpec{SignerName: signer, PodName: pod.Name, PodUID: pod.UID,
				ServiceAccountName: sa.Name, ServiceAccountUID: sa.UID, NodeName: types.NodeName(b.node.Name), NodeUID: b.node.UID, StubPKCS10Request: proof,
				MaxExpirationSeconds: ptr.To[int32](3600)}})
	})
}

// managerProcess is `trustplane manager --controllers podcertificate-signer`.
type managerProcess struct {
	cmd             *exec.Cmd
	metrics, probes string
	log             string
}

func (b *signerBench) startManager() (*managerProcess, error) {
	m := &managerProcess{metrics: testenv.BenchAddr(), probes: testenv.BenchAddr(), log: filepath.Join(b.tb.Dir, "manager.log")}
	m.cmd = exec.Command(b.tb.Binary, "manager", "--kubeconfig", b.tb.Kubeconfig, "--controllers", podcertsigner.Name,
		"--leader-elect=false", "--metrics-bind-address", m.metrics, "--health-probe-bind-address", m.probes,
		"--podcertificate-signer-ca-namespace", "default", "--podcertificate-signer-signer-workers", strconv.Itoa(*workers))
	logs, err := os.OpenFile(m.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive the bench
	m.cmd.Stderr = logs
	if entry, file := b.prof.Env(); entry != "" {
		m.cmd.Env = append(os.Environ(), entry)
		fmt.Printf("manager CPU profile: %s\n", file)
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *managerProcess) waitReady() error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if body, err := get("http://" + m.probes + "/readyz"); err == nil && body == "ok" {
			return nil
		}
	}
	return errors.New("the manager did not become ready")
}

// readyAt polls the manager's /readyz closely until it answers ok (its caches synced:
// every request listed), and returns when it did.
func (m *managerProcess) readyAt() (time.Time, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if body, err := get("http://" + m.probes + "/readyz"); err == nil && body == "ok" {
			return time.Now(), nil
		}
	}
	return time.Time{}, errors.New("the manager did not become ready")
}

func (m *managerProcess) stop() {
	_ = m.cmd.Process.Signal(os.Interrupt)
	_ = m.cmd.Wait()
}

// scraper reads the manager's probe endpoint (before a run, never during one).
var scraper = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func get(url string) (string, error) {
	resp, err := scraper.Get(url) //nolint:noctx // the bench's own loopback endpoints
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}
