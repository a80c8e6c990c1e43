package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// BenchRowsEnv names the JSON-lines file `make bench` collects every benchmark's rows in
// (test/bench/table turns them into the table and bin/bench/latest.json).
const BenchRowsEnv = "TRUSTPLANE_BENCH_ROWS"

// BenchRunEnv is which of make bench's runs (1, 2, 3) is recording: the table puts the
// same row of every run on one line, with its spread.
const BenchRunEnv = "TRUSTPLANE_BENCH_RUN"

// BenchScalesEnv set to "1" (make bench-* BENCH_SCALES=1) runs only each benchmark's 1x
// size: a quick check of a change, without the 10x size that takes most of the time (and
// so without growth rows).
const BenchScalesEnv = "TRUSTPLANE_BENCH_SCALES"

// BenchRow is one figure of a benchmark: a line of make bench's table and an object of
// bin/bench/latest.json.
type BenchRow struct {
	// System is one of jwks, aggregation, checksum, podcert, kubeconfig.
	System string `json:"system"`
	// Work says what was measured: "200 KubeconfigRequests at once", ...
	Work string `json:"work"`
	// Size is how many objects the work had.
	Size int `json:"size"`
	// Figure names the value: "p99", "all Ready", "CPU per object", "10x/1x per object".
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	// Floor is the same work's value by a plain client with the same concurrency (no
	// controller logic), against the same API server in the same run.
	Floor *float64 `json:"floor,omitempty"`
	// Peer is the real peer's value in the same run (kube-controller-manager).
	Peer *float64 `json:"peer,omitempty"`
	// Ratio is Value/Floor, Peer/Value, or the 10x/1x growth of the per-object cost.
	Ratio *float64 `json:"ratio,omitempty"`
	// Target says what passes: "ratio <= 1.3", "p99 < 2 s", ...; empty for a figure
	// printed for information.
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
	// Run is make bench's run that recorded the row ($TRUSTPLANE_BENCH_RUN); 0 outside it.
	Run int `json:"run,omitempty"`
}

// The targets of every figure measured against a floor or grown from 1x to 10x (issue
// 40): trustplane within 30% of a plain client doing the same writes at the median (or
// over the whole work), within 50% at p99, and linear growth with 20% for noise.
const (
	MaxFloorRatio    = 1.3
	MaxFloorRatioP99 = 1.5
	MaxGrowth        = 1.2
)

// FloorFirst says whether a benchmark times its floor before trustplane's run of the same
// size: in make bench's odd runs (and outside make bench), not in its even ones. The run
// that goes second meets an API server and etcd that have served the first, so neither
// side is always the one that meets the fresher one.
func FloorFirst() bool {
	run, _ := strconv.Atoi(os.Getenv(BenchRunEnv))
	return run%2 != 0 || run == 0
}

// RecordBench prints rows and, when make bench runs the benchmark ($TRUSTPLANE_BENCH_ROWS
// set), appends them to its file, each marked with the run ($TRUSTPLANE_BENCH_RUN).
func RecordBench(rows ...BenchRow) error {
	run, _ := strconv.Atoi(os.Getenv(BenchRunEnv))
	for i, r := range rows {
		rows[i].Run = run
		verdict := "no target"
		switch {
		case r.Target != "" && r.Pass:
			verdict = "target " + r.Target + ": pass"
		case r.Target != "":
			verdict = "target " + r.Target + ": FAIL"
		}
		fmt.Printf("bench-%s: %s, size %d: %s %.4g %s (%s)\n", r.System, r.Work, r.Size, r.Figure, r.Value, r.Unit, verdict)
	}
	path := os.Getenv(BenchRowsEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("bench rows: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			_ = f.Close()
			return fmt.Errorf("bench rows: %w", err)
		}
	}
	return f.Close()
}

// Ptr is a float64's address, for BenchRow's optional fields.
func Ptr(v float64) *float64 { return &v }

// BenchGrowth is the default multiple of a benchmark's 1x size for its larger one: def,
// or 1 (the 1x size only) when $TRUSTPLANE_BENCH_SCALES is "1".
func BenchGrowth(def int) int {
	if Only1x() {
		return 1
	}
	return def
}

// Only1x says whether $TRUSTPLANE_BENCH_SCALES asks for the 1x size alone.
func Only1x() bool { return os.Getenv(BenchScalesEnv) == "1" }

// FloorRow is a figure next to the floor's for the same work, judged by its ratio to it
// against limit (MaxFloorRatio for a median or a whole run, MaxFloorRatioP99 for a p99).
func FloorRow(system, work string, size int, figure string, value, floor float64, unit string, limit float64) BenchRow {
	ratio := value / floor
	return BenchRow{System: system, Work: work, Size: size, Figure: figure, Value: value, Unit: unit,
		Floor: Ptr(floor), Ratio: Ptr(ratio), Target: fmt.Sprintf("ratio <= %.1f", limit), Pass: ratio <= limit}
}

// LatencyRows are the p50 and p99 of per-object latencies next to the floor's, in ms,
// each with its target.
func LatencyRows(system, work string, size int, ours, floor []time.Duration) []BenchRow {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return []BenchRow{
		FloorRow(system, work, size, "p50", ms(Percentile(ours, 0.50)), ms(Percentile(floor, 0.50)), "ms", MaxFloorRatio),
		FloorRow(system, work, size, "p99", ms(Percentile(ours, 0.99)), ms(Percentile(floor, 0.99)), "ms", MaxFloorRatioP99),
	}
}

// Percentile is the p-quantile of d (nearest rank), 0 for none; d is left as it was.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}

// PerObject is one size's cost per object: wall time and CPU in seconds, peak memory in
// bytes.
type PerObject struct{ Time, CPU, Memory float64 }

// GrowthRows are the 10x/1x ratios of the per-object time, CPU and peak memory from small
// to large (issue 30: linear or better).
func GrowthRows(system, work string, size int, small, large PerObject) []BenchRow {
	row := func(figure string, a, b float64) BenchRow {
		ratio := b / a
		return BenchRow{System: system, Work: work, Size: size, Figure: figure, Value: ratio, Unit: "x",
			Ratio: Ptr(ratio), Target: fmt.Sprintf("ratio <= %.1f", MaxGrowth), Pass: ratio <= MaxGrowth}
	}
	return []BenchRow{
		row("10x/1x time per object", small.Time, large.Time),
		row("10x/1x CPU per object", small.CPU, large.CPU),
		row("10x/1x peak memory per object", small.Memory, large.Memory),
	}
}
