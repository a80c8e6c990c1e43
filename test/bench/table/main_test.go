package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testenv"
)

var sample = []testenv.BenchRow{
	{System: "kubeconfig", Work: "200 KubeconfigRequests at once", Size: 200, Figure: "p99", Value: 1.234, Unit: "s",
		Floor: testenv.Ptr(0.9), Ratio: testenv.Ptr(1.371), Target: "ratio <= 1.5", Pass: true},
	{System: "aggregation", Work: "1,000 churn events | 2,000 roles", Size: 2000, Figure: "CPU", Value: 0.5, Unit: "s",
		Peer: testenv.Ptr(8.8), Ratio: testenv.Ptr(17.6), Target: "ratio >= 10", Pass: true},
	{System: "checksum", Work: "one change among 500,000 Secrets", Size: 500000, Figure: "incremental p50", Value: 31.5, Unit: "ms"},
	{System: "checksum", Work: "initial checksum", Size: 500000, Figure: "CPU per object 10x/1x", Value: 1.42, Unit: "",
		Ratio: testenv.Ptr(1.42), Target: "ratio <= 1.2", Pass: false},
}

func TestParseRowsRoundTripsRecordBenchLines(t *testing.T) {
	var lines []string
	for _, r := range sample {
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(raw), "")
	}
	got, err := parseRows([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sample) || *got[0].Floor != 0.9 || got[1].Peer == nil || got[2].Ratio != nil || got[3].Pass {
		t.Fatalf("parsed rows differ: %+v", got)
	}
	if _, err := parseRows([]byte("{\"system\":\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a broken line: %v", err)
	}
}

func TestFormatTableOfOneRun(t *testing.T) {
	got := formatTable(summarize(sample), 1)
	want := `| system | work | size | figure (median) | min–max | floor or peer | ratio (min–max) | target | verdict |
|---|---|---:|---|---|---|---:|---|---|
| kubeconfig | 200 KubeconfigRequests at once | 200 | p99 1.23 s |  | floor 0.9 s | 1.37× | ratio <= 1.5 | pass |
| aggregation | 1,000 churn events \| 2,000 roles | 2,000 | CPU 0.5 s |  | peer 8.80 s | 17.6× | ratio >= 10 | pass |
| checksum | one change among 500,000 Secrets | 500,000 | incremental p50 31.5 ms |  |  |  |  | — |
| checksum | initial checksum | 500,000 | CPU per object 10x/1x 1.42 |  |  | 1.42× | ratio <= 1.2 | **FAIL** |
`
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if n := failed(summarize(sample)); n != 1 {
		t.Fatalf("failed = %d, want 1 (a row without a target never fails)", n)
	}
}

// threeRuns is one figure over three runs: the median run (by ratio) fails its target
// while another passes, and the same figure recorded twice in a run under two targets.
func threeRuns() []testenv.BenchRow {
	row := func(run int, value, floor float64) testenv.BenchRow {
		r := testenv.FloorRow("jwks", "1000 JWKSConfigs created at once", 1000, "all Ready", value, floor, "s", testenv.MaxFloorRatio)
		r.Run = run
		return r
	}
	second := func(run int, value float64) testenv.BenchRow {
		return testenv.BenchRow{System: "jwks", Work: "1000 JWKSConfigs created at once", Size: 1000, Figure: "all Ready",
			Value: value, Unit: "s", Target: "< 60 s", Pass: value < 60, Run: run}
	}
	return []testenv.BenchRow{
		row(1, 8.1, 6), second(1, 8.1),
		row(2, 7.0, 5), second(2, 7.0), // ratio 1.40
		row(3, 9.3, 7.5), second(3, 9.3), // ratio 1.24
	}
}

func TestSummaryIsTheMedianRunWithItsSpread(t *testing.T) {
	rows := summarize(threeRuns())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (one per figure and target): %+v", len(rows), rows)
	}
	r := rows[0]
	// Ratios 1.35, 1.40, 1.24: the median run is the first (8.1 s, floor 6 s).
	if r.Value != 8.1 || *r.Floor != 6 || r.Min != 7.0 || r.Max != 9.3 || *r.RatioMin != 9.3/7.5 || *r.RatioMax != 1.4 {
		t.Fatalf("summary %+v", r)
	}
	if r.Pass || r.RunsPassed != 1 || r.Runs != 3 {
		t.Fatalf("verdict on the median: pass %v, %d of %d runs pass", r.Pass, r.RunsPassed, r.Runs)
	}
	if got, want := verdict(r, 3), "**FAIL** (1 of 3 runs pass)"; got != want {
		t.Fatalf("verdict %q, want %q", got, want)
	}
	if got, want := verdict(rows[1], 3), "pass"; got != want {
		t.Fatalf("second target's verdict %q, want %q", got, want)
	}
	table := formatTable(rows, 3)
	if want := "| all Ready 8.10 s | 7–9.30 s | floor 6 s | 1.35× (1.24–1.40) | ratio <= 1.3 | **FAIL** (1 of 3 runs pass) |"; !strings.Contains(table, want) {
		t.Fatalf("table:\n%s\nwithout %s", table, want)
	}
}

func TestSummaryOfTwoRunsPassesOnlyIfBothDo(t *testing.T) {
	all := threeRuns()
	rows := summarize(append(all[:2:2], all[4:]...)) // runs 1 and 3: ratios 1.35 and 1.24
	r := rows[0]
	if r.Value != (8.1+9.3)/2 || r.Pass {
		t.Fatalf("two runs, one failing: %+v", r)
	}
	if got, want := verdict(r, 3), "**FAIL** (1 of 2 runs pass; recorded by 2 of 3 runs)"; got != want {
		t.Fatalf("verdict %q, want %q", got, want)
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.000123: "0.000123", 0.5: "0.5", 1.005: "1.00", 12.34: "12.3",
		123.4: "123", 83: "83", 7: "7", 1234.5: "1,235", 30000: "30,000", -2500: "-2,500", 1234567: "1,234,567"} {
		if got := number(v); got != want {
			t.Errorf("number(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestReportJSON(t *testing.T) {
	rep := report{Commit: "abc+dirty", Machine: machine{CPU: "Intel Xeon", Cores: 2}, Runs: 3, Rows: summarize(threeRuns())}
	raw, err := rep.json()
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"commit", "machine", "started", "finished", "runs", "rows"} {
		if _, ok := obj[key]; !ok {
			t.Errorf("latest.json without %q", key)
		}
	}
	row := obj["rows"].([]any)[0].(map[string]any)
	for _, key := range []string{"system", "work", "size", "figure", "value", "unit", "floor", "ratio", "target", "pass",
		"min", "max", "values", "ratioMin", "ratioMax", "runs", "runsPassed"} {
		if _, ok := row[key]; !ok {
			t.Errorf("latest.json row without %q: %v", key, row)
		}
	}
	if _, ok := row["run"]; ok {
		t.Errorf("a summary names a run: %v", row)
	}
	if !strings.Contains(string(raw), `"ratio <= 1.3"`) {
		t.Errorf("targets escaped: %s", raw)
	}
	if empty, _ := (report{}).json(); !strings.Contains(string(empty), `"rows": []`) {
		t.Errorf("no rows: %s, want []", empty)
	}
}

func TestReplaceSection(t *testing.T) {
	doc := "# x\n\n## Benchmarks\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\nafter\n"
	got, err := replaceSection(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\n## Benchmarks\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\nafter\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if again, _ := replaceSection(got, "new table\n"); again != got {
		t.Fatalf("not idempotent: %q", again)
	}
	if _, err := replaceSection("no markers", "t"); err == nil {
		t.Fatal("a README without markers was accepted")
	}
}

func TestHeaderNamesCommitMachineAndRuns(t *testing.T) {
	rep := report{Commit: "0123abc+dirty", Runs: 3,
		Machine: machine{CPU: "Intel Xeon", Kernel: "Linux 6.1", Go: "go1.27.3", Cores: 2, MemoryGiB: 23.4},
		Started: time.Date(2026, 11, 25, 6, 30, 0, 0, time.UTC), Finished: time.Date(2026, 11, 25, 8, 45, 0, 0, time.UTC)}
	h := rep.header("")
	if want := "`make bench` of commit `0123abc+dirty` on Intel Xeon, 2 cores, 23 GiB memory, Linux 6.1, go1.27.3: 3 runs of every bench, 2026-11-25 06:30–08:45 UTC.\n"; !strings.HasPrefix(h, want) {
		t.Fatalf("header %q, want it to start %q", h, want)
	}
	if !strings.Contains(rep.header("the tree changed"), "**Not one tree:** the tree changed.") {
		t.Fatal("a changed tree is not said")
	}
}

func TestSourceFingerprintIsStable(t *testing.T) {
	t.Chdir(testenv.RepoRoot())
	a, err := thisSource()
	if err != nil {
		t.Skipf("no git here: %v", err)
	}
	b, err := thisSource()
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint != b.Fingerprint || a.Commit != b.Commit || len(strings.TrimSuffix(a.Commit, "+dirty")) != 40 {
		t.Fatalf("two fingerprints of one tree: %+v, %+v", a, b)
	}
}
