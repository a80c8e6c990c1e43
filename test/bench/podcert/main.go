//go:build bench

// Command podcert is `make bench-podcert`:
//
//  1. 5,000 pod-certificate projections on one node, all issued: CPU time and allocation
//     of one refresh pass (every projection handled once, plus the metrics report), and
//     the memory the manager holds for them;
//  2. the signer (the trustplane manager binary, podcertificate-signer only) against a real
//     API server, at 1x and 10x requests (signer.go): its throughput in issued
//     PodCertificateRequests per second (ECDSA P-256), the floor (a plain client listing
//     the requests, then signing each and writing its status with the same concurrency), the
//     time from holding every request (the manager ready, the floor's list answered) to
//     each request issued (p50, p99) for both, as a watch sees it,
//     the manager's CPU and peak memory per request, and how they grow from 1x to 10x.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	projections = flag.Int("projections", 5000, "Projections on the node.")
	requests    = flag.Int("requests", 2000, "PodCertificateRequests for the signer at 1x.")
	bursts      = flag.Int("bursts", 3, "Bursts of -requests at 1x, each between two floors of its own: one lasts about 3 s, and the floors on either side of one burst differed by up to a quarter.")
	growth      = flag.Int("growth", testenv.BenchGrowth(10), "The second size is this many times -requests (1: one size only; $"+testenv.BenchScalesEnv+"=1 makes 1 the default).")
	workers     = flag.Int("workers", podcertsigner.DefaultOptions().Workers, "Signer workers (--podcertificate-signer-signer-workers).")
	profile     = flag.String("cpuprofile", "", "Write each manager process's CPU profile to this path with .1, .2, ... appended, in the order they start (go tool pprof -top <file>).")
)

func main() {
	flag.Parse()
	if err := refreshPass(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-podcert:", err)
		os.Exit(1)
	}
	if err := runSigner(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-podcert:", err)
		os.Exit(1)
	}
}

// memAPI keeps PCRs in memory: the refresh pass is the manager's own work.
type memAPI struct {
	mu   sync.Mutex
	pcrs map[string]*certificatesv1.PodCertificateRequest
	n    int
	now  func() time.Time
}

func (m *memAPI) CreatePCR(_ context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	pcr.Name = fmt.Sprintf("req-%d", m.n)
	pcr.CreationTimestamp = metav1.NewTime(m.now())
	m.pcrs[pcr.Namespace+"/"+pcr.Name] = pcr
	return pcr, nil
}

func (m *memAPI) GetPCR(ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pcrs[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

func (m *memAPI) ServiceAccountUID(context.Context, string, string) (types.UID, error) {
	return "sa", nil
}
func (m *memAPI) NodeUID(context.Context) (types.UID, error) { return "node", nil }

func refreshPass() error {
	clk := clocktesting.NewFakeClock(time.Now())
	api := &memAPI{pcrs: map[string]*certificatesv1.PodCertificateRequest{}, now: clk.Now}
	rec := events.NewFakeRecorder(1)
	m := podcert.NewManager(api, rec, clk, "node-1")
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "pod", clk.Now(), clk.Now().Add(24*time.Hour))
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, *projections)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: corev1.PodSpec{ServiceAccountName: "sa", Volumes: []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "s", KeyType: "ECDSAP256"}}}}}}}}}
	}
	keys := make([]podcert.Key, len(pods))
	for i, p := range pods {
		for k := range podcert.Projections(p) {
			keys[i] = k
		}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx := context.Background()
	for i, p := range pods { // request every certificate
		if err := m.Handle(ctx, p, keys[i]); err != nil {
			return err
		}
	}
	api.mu.Lock()
	for _, pcr := range api.pcrs { // the signer answers
		pcr.Status = certificatesv1.PodCertificateRequestStatus{
			Conditions:       []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue}},
			CertificateChain: string(chain.PEM()), BeginRefreshAt: ptr.To(metav1.NewTime(clk.Now().Add(12 * time.Hour))),
			NotAfter: ptr.To(metav1.NewTime(clk.Now().Add(24 * time.Hour))),
		}
	}
	api.mu.Unlock()
	for i, p := range pods {
		if err := m.Handle(ctx, p, keys[i]); err != nil {
			return err
		}
	}
	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)

	// One refresh pass in the steady state: every projection handled, then the report.
	var passes []time.Duration
	var allocs, bytes uint64
	cpuBefore := cpuSeconds()
	const rounds = 20
	for range rounds {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		start := time.Now()
		for i, p := range pods {
			if err := m.Handle(ctx, p, keys[i]); err != nil {
				return err
			}
		}
		report := m.Report(pods)
		passes = append(passes, time.Since(start))
		runtime.ReadMemStats(&b)
		allocs += b.Mallocs - a.Mallocs
		bytes += b.TotalAlloc - a.TotalAlloc
		if report[podcert.SignerAndState{SignerName: "s", State: podcert.StateFresh}] != len(pods) {
			return fmt.Errorf("report: %v", report)
		}
	}
	cpu := (cpuSeconds() - cpuBefore) / rounds
	fmt.Printf("refresh pass over %d projections: %.1f ms wall, %.1f ms CPU, %d allocations (%.1f KiB) per pass (target < 100 ms); manager holds %.1f MiB for them\n",
		len(pods), median(passes).Seconds()*1000, cpu*1000, allocs/rounds, float64(bytes/rounds)/1024, float64(held.HeapAlloc-before.HeapAlloc)/(1<<20))
	return nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
