package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// API warnings (a deprecated field, a webhook's note) would go to controller-runtime's
	// logger; the run's output is its own.
	ctrllog.SetLogger(logr.Discard())
	if !runsTestChaos() {
		// The judging functions' tests need no control plane.
		os.Exit(m.Run())
	}
	// The API server's audit log judges the replicas' writes (audit.go).
	dir, err := os.MkdirTemp("", "trustplane-chaos-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts, err := withAuditLog(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.Main(m, &env, opts...)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// runsTestChaos says whether -run may select TestChaos (no -run selects everything).
func runsTestChaos() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top := strings.Split(f.Value.String(), "/")[0]
	matched, err := regexp.MatchString(top, "TestChaos")
	return err != nil || matched
}

// systems are the five systems' workloads, in the order their output appears.
func systems() []System {
	return []System{
		newPodcert(),
		newAggregation(),
		newJWKS(),
		newChecksum(),
		newKubeconfig(),
		newCluster(),
	}
}

// The short run of make test: a couple of minutes of faults (make chaos runs 200).
const (
	shortDuration = 2 * time.Minute
	settleTimeout = 2 * time.Minute
)

// TestChaos is make chaos, and a short run of it in make test: CHAOS_SEED (default: a new
// one, printed), CHAOS_FAULTS (default: as many as fit), CHAOS_DURATION (default 2m),
// CHAOS_SYSTEMS (default: all) and CHAOS_FAULT_KINDS (default: all; kinds containing one
// of these comma-separated words) replay or shape a run; CHAOS_LOGS (a directory) keeps
// every process's output.
func TestChaos(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var run []System
	for _, s := range systems() {
		if len(cfg.Systems) == 0 || slices.Contains(cfg.Systems, s.Name()) {
			run = append(run, s)
		}
	}
	result := Run(t, env, cfg, run)
	fmt.Println(result)
	if result.Violations > 0 {
		t.Errorf("%d invariant violations (above); replay with CHAOS_SEED=%d", result.Violations, result.Seed)
	}
	if result.TooLittleJudged() {
		t.Errorf("%d of %d checks could not be judged, more than %.0f%%: the run proves too little (the counts per invariant are above); replay with CHAOS_SEED=%d",
			result.NotJudged, result.Checks, maxNotJudgedShare*100, result.Seed)
	}
}

func configFromEnv() (Config, error) {
	cfg := Config{Seed: rand.Uint64() >> 1, Duration: shortDuration, SettleTimeout: settleTimeout}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("CHAOS_SEED=%q: want a non-negative integer", v)
		}
		cfg.Seed = seed
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("CHAOS_FAULTS=%q: want a non-negative integer", v)
		}
		cfg.Faults = n
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("CHAOS_DURATION=%q: want a positive Go duration such as 20m", v)
		}
		cfg.Duration = d
	}
	if v := os.Getenv("CHAOS_SYSTEMS"); v != "" {
		cfg.Systems = strings.Split(v, ",")
	}
	if v := os.Getenv("CHAOS_FAULT_KINDS"); v != "" {
		cfg.FaultKinds = strings.Split(v, ",")
	}
	if v := os.Getenv("CHAOS_LOGS"); v != "" {
		if err := os.MkdirAll(v, 0o755); err != nil {
			return cfg, fmt.Errorf("CHAOS_LOGS=%q: %w", v, err)
		}
		cfg.LogDir = v
	}
	return cfg, nil
}
