package testenv

import (
	"encoding/json"
	"fmt"
	"os"
)

// BenchRowsEnv names the JSON-lines file `make bench` collects every benchmark's rows in
// (test/bench/table turns them into the table and bin/bench/latest.json).
const BenchRowsEnv = "TRUSTPLANE_BENCH_ROWS"

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
	// Target says what passes: "ratio <= 1.5", "p99 < 2 s", ...; empty for a figure
	// printed for information.
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
}

// RecordBench prints rows and, when make bench runs the benchmark ($TRUSTPLANE_BENCH_ROWS
// set), appends them to its file.
func RecordBench(rows ...BenchRow) error {
	for _, r := range rows {
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

// PerObject is one size's cost per object: wall time and CPU in seconds, peak memory in
// bytes.
type PerObject struct{ Time, CPU, Memory float64 }

// MaxGrowth is the most the per-object cost may grow from 1x to 10x: linear or better,
// with room for noise.
const MaxGrowth = 1.3

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
