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
		Ratio: testenv.Ptr(1.42), Target: "ratio <= 1.3", Pass: false},
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

func TestFormatTable(t *testing.T) {
	got := formatTable(sample)
	want := `| system | work | size | figure | floor or peer | ratio | target | verdict |
|---|---|---:|---|---|---:|---|---|
| kubeconfig | 200 KubeconfigRequests at once | 200 | p99 1.23 s | floor 0.9 s | 1.37× | ratio <= 1.5 | pass |
| aggregation | 1,000 churn events \| 2,000 roles | 2,000 | CPU 0.5 s | peer 8.80 s | 17.6× | ratio >= 10 | pass |
| checksum | one change among 500,000 Secrets | 500,000 | incremental p50 31.5 ms |  |  |  | — |
| checksum | initial checksum | 500,000 | CPU per object 10x/1x 1.42 |  | 1.42× | ratio <= 1.3 | **FAIL** |
`
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if failed(sample) != 1 {
		t.Fatalf("failed = %d, want 1 (a row without a target never fails)", failed(sample))
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

func TestRowsJSONKeys(t *testing.T) {
	raw, err := rowsJSON(sample[:2])
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(raw, &objs); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"system", "work", "size", "figure", "value", "unit", "floor", "ratio", "target", "pass"} {
		if _, ok := objs[0][key]; !ok {
			t.Errorf("latest.json row without %q: %v", key, objs[0])
		}
	}
	if _, ok := objs[1]["peer"]; !ok {
		t.Errorf("peer row without peer: %v", objs[1])
	}
	if _, ok := objs[1]["floor"]; ok {
		t.Errorf("peer row with a floor: %v", objs[1])
	}
	if !strings.Contains(string(raw), `"ratio <= 1.5"`) {
		t.Errorf("targets escaped: %s", raw)
	}
	if empty, _ := rowsJSON(nil); strings.TrimSpace(string(empty)) != "[]" {
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

func TestHeaderNamesTheMachine(t *testing.T) {
	m := machine{CPU: "Intel Xeon", Kernel: "Linux 6.1", Go: "go1.25.0", Cores: 2, MemoryGiB: 23.4,
		Date: time.Date(2026, 11, 25, 6, 30, 0, 0, time.UTC)}
	if got, want := m.header(), "`make bench` on Intel Xeon, 2 cores, 23 GiB memory, Linux 6.1, go1.25.0, 2026-11-25 06:30 UTC.\n"; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
}
