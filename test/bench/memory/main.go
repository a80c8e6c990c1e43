//go:build bench

// Command memory is `make bench-memory`: it runs the real `trustplane manager` binary
// (every controller on by default; secret-checksum, tls-expiry and jwks watch Secrets) against a real
// kube-apiserver + etcd and prints the manager's peak resident memory (VmHWM)
//
//  1. with a few ordinary kubernetes.io/tls Secrets (the baseline), and
//  2. after 400 Opaque Secrets with a 900 KB tls.crt (versioned, so the checksum
//     controller must look at them) and a few kubernetes.io/tls Secrets with such a
//     tls.crt are added — what a tenant allowed to create Secrets can do.
//
// The caches hold derived values only (IDs, hashes, expiry), so the second number must
// stay close to the first (target < 150 MiB): the informers still receive every object,
// one at a time, but keep nothing of its data.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	big      = flag.Int("big", 400, "Opaque Secrets with a large tls.crt.")
	bigTLS   = flag.Int("big-tls", 5, "kubernetes.io/tls Secrets with a large tls.crt.")
	normal   = flag.Int("normal", 5, "Ordinary kubernetes.io/tls Secrets.")
	bigBytes = flag.Int("big-bytes", 900_000, "Size of the large tls.crt.")
	// client-go streams an informer's initial list (WatchListClient, on by default since
	// 1.35) when the API server can; otherwise it receives the list as one response.
	controllers = flag.String("controllers", "*", "The manager's --controllers: every controller on by default, as shipped.")
	pagedList   = flag.Bool("paged-list", true, "Also measure with WatchListClient=false.")
)

const namespace = "bench-memory"

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-memory:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	b, err := testenv.StartBench("bench-memory")
	if err != nil {
		return err
	}
	defer b.Close()
	env, kubeconfig, binary := b.Env, b.Kubeconfig, b.Binary
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "bench", time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour))
	if err != nil {
		return err
	}
	fmt.Printf("bench-memory: real kube-apiserver + etcd, trustplane manager binary (--controllers=%s)\n", *controllers)

	// 1. Baseline.
	if err := createSecrets(ctx, env.Client, "site", 0, *normal, corev1.SecretTypeTLS, chain.PEM(), chain.KeyPEM()); err != nil {
		return err
	}
	baseline, err := measure(ctx, env.Client, binary, kubeconfig, *normal, true)
	if err != nil {
		return err
	}
	fmt.Printf("baseline (%d TLS Secrets): manager peak RSS %.0f MiB\n", *normal, mib(baseline))

	// 2. Large tls.crt: a real certificate (so the checksum's pair loads) padded with
	// copies of itself to the size asked for.
	var large []byte
	for len(large)+len(chain.PEM()) <= *bigBytes {
		large = append(large, chain.PEM()...)
	}
	start := time.Now()
	if err := createSecrets(ctx, env.Client, "big", 1000, *big, corev1.SecretTypeOpaque, large, chain.KeyPEM()); err != nil {
		return err
	}
	if err := createSecrets(ctx, env.Client, "bigtls", 5000, *bigTLS, corev1.SecretTypeTLS, large, chain.KeyPEM()); err != nil {
		return err
	}
	fmt.Printf("created %d Opaque + %d kubernetes.io/tls Secrets with a %d-byte tls.crt in %.1fs\n",
		*big, *bigTLS, len(large), time.Since(start).Seconds())
	peak, err := measure(ctx, env.Client, binary, kubeconfig, *normal+*big+*bigTLS, true)
	if err != nil {
		return err
	}
	paged := int64(0)
	if *pagedList {
		if paged, err = measure(ctx, env.Client, binary, kubeconfig, *normal+*big+*bigTLS, false); err != nil {
			return err
		}
	}
	verdict := "ok"
	if peak >= 150<<20 {
		verdict = "OVER TARGET"
	}
	fmt.Printf("with them: manager peak RSS %.0f MiB (target < 150 MiB: %s; baseline %.0f MiB)\n", mib(peak), verdict, mib(baseline))
	if *pagedList {
		fmt.Printf("with them, lists not streamed (WatchListClient=false, as against an API server without streaming lists): manager peak RSS %.0f MiB\n", mib(paged))
	}
	warnings, err := countEvents(ctx, env.Client, "CertificateTooLarge")
	if err != nil {
		return err
	}
	fmt.Printf("CertificateTooLarge Warning events: %d (want %d, one per oversized kubernetes.io/tls Secret)\n", warnings, *bigTLS)
	work := fmt.Sprintf("manager with %d Secrets of a %d-byte tls.crt", *big+*bigTLS, *bigBytes)
	rows := []testenv.BenchRow{
		{System: "checksum", Work: fmt.Sprintf("manager with %d ordinary TLS Secrets", *normal), Size: *normal, Figure: "peak RSS", Value: mib(baseline), Unit: "MiB"},
		{System: "checksum", Work: work, Size: *big + *bigTLS, Figure: "peak RSS", Value: mib(peak), Unit: "MiB", Target: "< 150 MiB", Pass: peak < 150<<20},
	}
	if *pagedList {
		rows = append(rows, testenv.BenchRow{System: "checksum", Work: work + ", lists not streamed", Size: *big + *bigTLS, Figure: "peak RSS",
			Value: mib(paged), Unit: "MiB"})
	}
	return testenv.RecordBench(rows...)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func createSecrets(ctx context.Context, c client.Client, prefix string, firstID, n int, typ corev1.SecretType, crt, key []byte) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			return c.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", prefix, firstID+i),
					Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}},
				Type: typ,
				Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
			})
		})
	}
	return g.Wait()
}

// measure starts the manager, waits until it has published a checksum over ids IDs (so
// every Secret went through its caches), lets it settle and returns its peak RSS.
func measure(ctx context.Context, c client.Client, binary, kubeconfig string, ids int, watchList bool) (int64, error) {
	metrics, probes := testenv.BenchAddr(), testenv.BenchAddr()
	cmd := exec.Command(binary, "manager", "--kubeconfig", kubeconfig, "--controllers", *controllers,
		"--leader-elect=false", "--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
		"--jwks-server-bind-address", "0", "--secret-checksum-publish-namespace", namespace)
	cmd.Env = append(os.Environ(), fmt.Sprintf("KUBE_FEATURE_WatchListClient=%t", watchList))
	var logs testenv.SyncBuffer
	cmd.Stderr = &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive the bench
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// The exit status is no result: an interrupted manager may report cancelled work.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-exited:
			return 0, fmt.Errorf("manager exited: %w; its log ends:\n%s", waitErr, tail(logs.String(), 2000))
		default:
		}
		if published(ctx, c, ids) {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return 0, fmt.Errorf("no checksum over %d IDs within 3m; the manager's log ends:\n%s", ids, tail(logs.String(), 2000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // tls-expiry's reconciles, events, a GC cycle
	peak := testenv.PeakRSS(cmd.Process.Pid)
	stop()
	return peak, nil
}

func published(ctx context.Context, c client.Client, ids int) bool {
	list := &tenginev1.SecretCheckSumList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return false
	}
	for _, s := range list.Items {
		if len(s.Spec.IDs) == ids {
			return true
		}
	}
	return false
}

func countEvents(ctx context.Context, c client.Client, reason string) (int, error) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, e := range list.Items {
		if e.Reason == reason && e.Type == corev1.EventTypeWarning {
			seen[e.InvolvedObject.Name] = true
		}
	}
	return len(seen), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
