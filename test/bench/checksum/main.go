//go:build bench

// Command checksum is `make bench-checksum`: 50,000 and 500,000 TLS Secrets through the
// control plane's checksum path, in process. At each size it prints the initial
// checksum's time, CPU and memory per Secret, then the time to the new checksum after one
// secret changes — the incremental path (parse the one certificate, move one ID, hash
// from there on) against a full recompute (parse all, sort, hash) on the same data in the
// same run — and the 10x/1x growth of each per-Secret cost. Then the same through a real
// API server (apiserver.go): 30,000 Secrets, the first publication, and single changes
// timed until a watching data plane sees the new SecretCheckSum, against a plain client
// writing the same SecretCheckSums (the floor).
package main

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	secrets     = flag.Int("secrets", 50000, "TLS Secrets at 1x.")
	growth      = flag.Int("growth", testenv.BenchGrowth(10), "The larger size is this many times -secrets (1: only 1x; $"+testenv.BenchScalesEnv+"=1 makes 1 the default).")
	changes     = flag.Int("changes", 200, "Single-secret changes to time at each size.")
	fullSamples = flag.Int("full-samples", 3, "Full recomputes to time at each size (each takes seconds).")
)

type secret struct {
	name        string
	annotations map[string]string
	data        map[string][]byte // tls.crt and tls.key
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-checksum:", err)
		os.Exit(1)
	}
}

// inProcess is one size's figures.
type inProcess struct {
	n                              int
	initial, initialCPU            time.Duration
	setBytes                       int64
	incrementalP50, incrementalP99 time.Duration
	full                           time.Duration // p50
}

func run() error {
	results, err := inProcessRuns()
	if err != nil {
		return err
	}
	if err := testenv.RecordBench(inProcessRows(results)...); err != nil {
		return err
	}
	return apiServerRun()
}

// inProcessRuns measures each size on certificates issued for it alone: the heap then
// holds as many Secrets as the size, as an informer's would. (With the 10x size's
// certificates held during the 1x run, that run allocated less than the heap held, so no
// garbage collection fell in it, and its CPU per Secret looked a quarter lower than a
// collector running at that size would make it.)
func inProcessRuns() ([]inProcess, error) {
	sizes := []int{*secrets}
	if *growth > 1 {
		sizes = append(sizes, *secrets**growth)
	}
	fmt.Printf("bench-checksum: %v TLS Secrets in process, %d single-secret changes each\n", sizes, *changes)
	var results []inProcess
	for _, n := range sizes {
		start := time.Now()
		all, err := makeSecrets(n + *changes)
		if err != nil {
			return nil, err
		}
		fmt.Printf("issued %d certificates in %v\n", len(all), time.Since(start).Round(time.Second))
		world, spare := all[:n], all[n:]
		r, err := measure(world, spare)
		if err != nil {
			return nil, fmt.Errorf("%d Secrets: %w", n, err)
		}
		results = append(results, r)
		fmt.Printf("%d Secrets: initial checksum %v (%.2f µs CPU per Secret), ID set %.1f MiB (%.0f bytes per Secret); one secret changed → new checksum: incremental p50 %v, p99 %v; full recompute p50 %v; speed-up %.0fx\n",
			n, r.initial.Round(time.Millisecond), perObject(r.initialCPU, n), float64(r.setBytes)/(1<<20), float64(r.setBytes)/float64(n),
			r.incrementalP50.Round(time.Microsecond), r.incrementalP99.Round(time.Microsecond), r.full.Round(time.Millisecond), float64(r.full)/float64(r.incrementalP50))
	}
	return results, nil
}

// measure computes the initial checksum of world, then changes one Secret at a time
// (taking the renewed certificates from spare), timing the incremental path and, a few
// times, a full recompute of the same data.
func measure(world, spare []secret) (inProcess, error) {
	r := inProcess{n: len(world)}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	start := time.Now()
	set := checksum.NewSet()
	for _, s := range world {
		id, err := checksum.SecretID(s.name, s.annotations, checksum.DefaultVersionAnnotation, s.data)
		if err != nil {
			return r, err
		}
		set.Put(s.name, id)
	}
	initialSum := set.Checksum()
	r.initial, r.initialCPU = time.Since(start), cpuTime()-cpu0
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r.setBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)

	var incremental, full []time.Duration
	for i := range spare {
		// Secret i gets a renewed certificate and a new version.
		changed := spare[i]
		changed.name = world[i].name
		changed.annotations = map[string]string{checksum.DefaultVersionAnnotation: fmt.Sprint(2 + i)}
		world[i] = changed

		start := time.Now()
		id, err := checksum.SecretID(changed.name, changed.annotations, checksum.DefaultVersionAnnotation, changed.data)
		if err != nil {
			return r, err
		}
		set.Put(changed.name, id)
		incSum := set.Checksum()
		incremental = append(incremental, time.Since(start))

		if i < *fullSamples { // a full recompute takes seconds: a few samples are enough
			start = time.Now()
			ids := make([]string, 0, len(world))
			for _, s := range world {
				id, err := checksum.SecretID(s.name, s.annotations, checksum.DefaultVersionAnnotation, s.data)
				if err != nil {
					return r, err
				}
				ids = append(ids, id)
			}
			fullSum := checksum.Sum(ids)
			full = append(full, time.Since(start))
			if fullSum != incSum {
				return r, fmt.Errorf("change %d: incremental %s != full %s", i, incSum, fullSum)
			}
		}
	}
	if initialSum == set.Checksum() {
		return r, fmt.Errorf("the checksum did not change")
	}
	r.incrementalP50, r.incrementalP99 = testenv.Percentile(incremental, 0.5), testenv.Percentile(incremental, 0.99)
	r.full = testenv.Percentile(full, 0.5)
	return r, nil
}

// inProcessRows are the figures of each size and, with two sizes, the growth of each
// per-object cost.
func inProcessRows(results []inProcess) []testenv.BenchRow {
	var rows []testenv.BenchRow
	for i, r := range results {
		work := fmt.Sprintf("one change among %s Secrets, in process", thousands(r.n))
		p50 := ms(r.incrementalP50)
		inc := testenv.BenchRow{System: "checksum", Work: work, Size: r.n, Figure: "incremental p50", Value: p50, Unit: "ms"}
		speedUp := testenv.BenchRow{System: "checksum", Work: work, Size: r.n, Figure: "full recompute / incremental", Value: float64(r.full) / float64(r.incrementalP50), Unit: "×"}
		if i == 0 { // the targets are the 1x size's; the 10x size's are its growth rows
			inc.Target, inc.Pass = "p50 < 10 ms", p50 < 10
			speedUp.Target, speedUp.Pass = ">= 100×", speedUp.Value >= 100
		}
		initial := fmt.Sprintf("initial checksum of %s Secrets, in process", thousands(r.n))
		rows = append(rows, inc, speedUp,
			testenv.BenchRow{System: "checksum", Work: work, Size: r.n, Figure: "full recompute per Secret", Value: perObject(r.full, r.n), Unit: "µs"},
			testenv.BenchRow{System: "checksum", Work: initial, Size: r.n, Figure: "time per Secret", Value: perObject(r.initial, r.n), Unit: "µs"},
			testenv.BenchRow{System: "checksum", Work: initial, Size: r.n, Figure: "CPU per Secret", Value: perObject(r.initialCPU, r.n), Unit: "µs"},
			testenv.BenchRow{System: "checksum", Work: initial, Size: r.n, Figure: "memory per Secret (ID set)", Value: float64(r.setBytes) / float64(r.n), Unit: "B"})
	}
	if len(results) < 2 {
		return rows
	}
	one, ten := results[0], results[len(results)-1]
	work := fmt.Sprintf("%s → %s Secrets, in process", thousands(one.n), thousands(ten.n))
	for _, g := range []struct {
		figure   string
		one, ten float64
	}{
		{"initial checksum time per Secret", perObject(one.initial, one.n), perObject(ten.initial, ten.n)},
		{"initial checksum CPU per Secret", perObject(one.initialCPU, one.n), perObject(ten.initialCPU, ten.n)},
		{"ID set memory per Secret", float64(one.setBytes) / float64(one.n), float64(ten.setBytes) / float64(ten.n)},
	} {
		rows = append(rows, growthRow("checksum", work, ten.n, g.figure, g.one, g.ten))
	}
	return rows
}

// growthRow is the 10x/1x ratio of a per-object cost; target: linear or better.
func growthRow(system, work string, size int, figure string, one, ten float64) testenv.BenchRow {
	ratio := ten / one
	return testenv.BenchRow{System: system, Work: work, Size: size, Figure: figure + " 10x/1x", Value: ratio,
		Ratio: testenv.Ptr(ratio), Target: fmt.Sprintf("ratio <= %.1f", testenv.MaxGrowth), Pass: ratio <= testenv.MaxGrowth}
}

func perObject(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// makeSecrets issues n distinct certificates for one key (issuing, not key generation,
// dominates; the checksum path reads the certificate and checks the pair), on every CPU.
func makeSecrets(n int) ([]secret, error) {
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		return nil, err
	}
	keyPEM := testcerts.KeyPEM(key)
	out := make([]secret, n)
	var g errgroup.Group
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		g.Go(func() error {
			for i := w; i < n; i += workers {
				tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: fmt.Sprintf("site-%d.example.com", i)},
					NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
				der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
				if err != nil {
					return err
				}
				out[i] = secret{
					name:        fmt.Sprintf("site-example-com-%d", i),
					annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"},
					data: map[string][]byte{
						checksum.KeyTLSCrt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
						checksum.KeyTLSKey: keyPEM,
					},
				}
			}
			return nil
		})
	}
	return out, g.Wait()
}
