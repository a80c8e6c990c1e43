//go:build bench

// Command podcertpropagation is `make bench-podcert-propagation`: the propagation budget
// of a CA rotation, from the moment the signer publishes a new CA in its ClusterTrustBundle
// to the moment every projected trust bundle on the node holds it (issue 43; users of
// other pod certificate signers saw a trust-bundle change take about 6 minutes to reach
// running pods).
//
// It runs everything for real: a local control plane and a real node (internal/localnode:
// containerd, the kubelet v1.37.1, kube-scheduler; internal/localnode/localcluster, as
// test/node), the trustplane manager binary with only the podcertificate-signer
// controller, and -pods pause pods, each with a projected volume holding a
// clusterTrustBundle source that selects the signer's live bundle (signerName and
// k8s.spiffe.io/canarying=live), as a workload that trusts the signer mounts it. Once every
// pod runs with the current CA in its file, it writes a new CA into the CA Secret's
// next.crt/next.key (an operator's rotation; without canary observation the signer
// publishes it in the live bundle at once) and records when the Secret was written, when
// the ClusterTrustBundle holds the new CA (read back), and when each pod's projected file
// holds it, read from the kubelet's pod volume directory on the host (no exec into the
// containers). It does that -rotations times, then again with -growth times the pods, and
// all of it once per kubelet syncFrequency of -sync-frequencies: the node's own 10s and
// the kubelet's default 1m. The figures are printed, and recorded for make bench's table;
// none is judged against a target.
//
// It needs Linux, root and the node's packages and builds (as test/node); elsewhere it
// says why in one line and fails.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	pods      = flag.Int("pods", 10, "Pods at 1x, each with a projected ClusterTrustBundle volume (pause containers: the 2-core machines this runs on start about one a second).")
	growth    = flag.Int("growth", testenv.BenchGrowth(3), "The second size is this many times -pods (1: one size only; $"+testenv.BenchScalesEnv+"=1 makes 1 the default).")
	rotations = flag.Int("rotations", 3, "CA rotations measured at each size.")
	syncs     = flag.String("sync-frequencies", "10s,1m", "The kubelet syncFrequency of each run, comma-separated: the node's own (10s) and the kubelet's default (1m).")
	poll      = flag.Duration("poll", 50*time.Millisecond, "How often the bundle and the pods' files are read: the figures' resolution.")
)

const (
	nodeName  = "node-1"
	namespace = "propagation"
	caSecret  = "propagation-ca"
	// volume and file are where each pod's trust bundle is projected.
	volume, file = "trust-bundle", "ca.pem"
)

// signerName is the signer's default name: its live bundle is BundleName(signerName).
var signerName = podcertsigner.DefaultOptions().SignerName

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-podcert-propagation:", err)
		os.Exit(1)
	}
}

func run() error {
	ctrllog.SetLogger(logr.Discard()) // envtest's own info lines (the control plane's start)
	root := testenv.RepoRoot()
	nodeBin, images := filepath.Join(root, "bin", "node"), filepath.Join(root, "bin", "images")
	if err := localnode.Preflight(nodeBin, images); err != nil {
		return fmt.Errorf("no node on this machine: %w", err)
	}
	frequencies, err := parseFrequencies(*syncs)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-podcert-propagation-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	binary, err := testenv.BenchBinary(dir)
	if err != nil {
		return err
	}
	// Ctrl-C still takes the node down: its processes, pods, bridge and rules.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		running.stop()
		_ = os.RemoveAll(dir)
		os.Exit(130)
	}()
	sizes := []int{*pods}
	if *growth > 1 {
		sizes = append(sizes, *pods**growth)
	}
	var rows []testenv.BenchRow
	for _, every := range frequencies {
		b := &bench{dir: filepath.Join(dir, "sync-"+every.String()), k8sBin: filepath.Join(root, "bin", "k8s"), nodeBin: nodeBin,
			images: images, binary: binary, sync: every}
		measured, err := b.run(sizes)
		rows = append(rows, measured...)
		if err != nil {
			if len(rows) > 0 {
				_ = testenv.RecordBench(rows...)
			}
			return fmt.Errorf("syncFrequency %v: %w", every, err)
		}
	}
	return testenv.RecordBench(rows...)
}

func parseFrequencies(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, s := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-sync-frequencies: %q is not a positive duration", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// running is what an interrupt must stop: the run's manager and cluster.
var running stopper

// stopper runs the stops of what is up, last first, once.
type stopper struct {
	mu    sync.Mutex
	stops []func()
}

// push adds a stop.
func (s *stopper) push(stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, stop)
}

func (s *stopper) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
