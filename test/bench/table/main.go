// Command table is the end of `make bench`: it reads the rows every benchmark recorded
// (testenv.RecordBench, one JSON object a line), prints them as one table under the
// machine they were taken on, writes them to bin/bench/latest.json as a JSON array and,
// with -readme, puts the table into README.md between its bench markers.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/trustplane/trustplane/internal/testenv"
)

// README markers around the generated section.
const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

var (
	rowsPath = flag.String("rows", "bin/bench/rows.jsonl", "JSON-lines file of the benchmarks' rows.")
	jsonPath = flag.String("json", "bin/bench/latest.json", "Where the rows go as one JSON array (empty: nowhere).")
	readme   = flag.String("readme", "", "README to rewrite between "+beginMarker+" and "+endMarker+" (empty: none).")
	note     = flag.String("note", "", "A line printed under the header: how the rows were taken, when not by one `make bench`.")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench table:", err)
		os.Exit(1)
	}
}

func run() error {
	raw, err := os.ReadFile(*rowsPath)
	if err != nil {
		return err
	}
	rows, err := parseRows(raw)
	if err != nil {
		return err
	}
	m := thisMachine(time.Now())
	out := m.header() + "\n"
	if *note != "" {
		out += *note + "\n\n"
	}
	out += formatTable(rows)
	fmt.Print(out)
	if *jsonPath != "" {
		js, err := rowsJSON(rows)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, js, 0o644); err != nil {
			return err
		}
		fmt.Printf("\n%d rows written to %s\n", len(rows), *jsonPath)
	}
	if *readme != "" {
		old, err := os.ReadFile(*readme)
		if err != nil {
			return err
		}
		updated, err := replaceSection(string(old), out)
		if err != nil {
			return fmt.Errorf("%s: %w", *readme, err)
		}
		if err := os.WriteFile(*readme, []byte(updated), 0o644); err != nil {
			return err
		}
		fmt.Printf("table written to %s\n", *readme)
	}
	if n := failed(rows); n > 0 {
		fmt.Printf("%d of %d rows miss their target\n", n, len(rows))
	}
	return nil
}

// failed counts the rows that have a target and miss it.
func failed(rows []testenv.BenchRow) int {
	n := 0
	for _, r := range rows {
		if r.Target != "" && !r.Pass {
			n++
		}
	}
	return n
}

// parseRows reads JSON lines; blank lines are skipped.
func parseRows(raw []byte) ([]testenv.BenchRow, error) {
	var rows []testenv.BenchRow
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r testenv.BenchRow
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("rows line %d: %w", n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// rowsJSON is latest.json: an array of the rows, never null.
func rowsJSON(rows []testenv.BenchRow) ([]byte, error) {
	if rows == nil {
		rows = []testenv.BenchRow{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "p50 < 10 ms", not "p50 \u003c 10 ms"
	enc.SetIndent("", "  ")
	err := enc.Encode(rows)
	return b.Bytes(), err
}

// formatTable is the rows as a Markdown table, in the order they were recorded.
func formatTable(rows []testenv.BenchRow) string {
	var b strings.Builder
	b.WriteString("| system | work | size | figure | floor or peer | ratio | target | verdict |\n")
	b.WriteString("|---|---|---:|---|---|---:|---|---|\n")
	for _, r := range rows {
		cells := []string{r.System, r.Work, thousands(r.Size), r.Figure + " " + withUnit(r.Value, r.Unit),
			floorOrPeer(r), ratio(r.Ratio), r.Target, verdict(r)}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func floorOrPeer(r testenv.BenchRow) string {
	switch {
	case r.Floor != nil:
		return "floor " + withUnit(*r.Floor, r.Unit)
	case r.Peer != nil:
		return "peer " + withUnit(*r.Peer, r.Unit)
	}
	return ""
}

func ratio(v *float64) string {
	if v == nil {
		return ""
	}
	return number(*v) + "×"
}

// verdict is pass or FAIL against the row's target; a row without a target is a figure.
func verdict(r testenv.BenchRow) string {
	switch {
	case r.Target == "":
		return "—"
	case r.Pass:
		return "pass"
	}
	return "**FAIL**"
}

func withUnit(v float64, unit string) string {
	if unit == "" {
		return number(v)
	}
	return number(v) + " " + unit
}

// number prints three significant digits, whole numbers from 1,000 on with separators.
func number(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprint(v)
	case a >= 1000:
		return thousands(int(math.Round(v)))
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64) // a count: 83 writes, not 83.0
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// replaceSection puts section between the README's markers, keeping the markers.
func replaceSection(doc, section string) (string, error) {
	begin := strings.Index(doc, beginMarker)
	end := strings.Index(doc, endMarker)
	if begin < 0 || end < 0 || end < begin {
		return "", fmt.Errorf("no %s … %s section", beginMarker, endMarker)
	}
	return doc[:begin+len(beginMarker)] + "\n" + strings.TrimRight(section, "\n") + "\n" + doc[end:], nil
}

// machine is what the figures were taken on.
type machine struct {
	CPU, Kernel, Go string
	Cores           int
	MemoryGiB       float64
	Date            time.Time
}

func thisMachine(now time.Time) machine {
	m := machine{CPU: "unknown CPU", Kernel: "unknown", Go: runtime.Version(), Cores: runtime.NumCPU(), Date: now.UTC()}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	return m
}

func (m machine) header() string {
	return fmt.Sprintf("`make bench` on %s, %d cores, %.0f GiB memory, %s, %s, %s.\n",
		m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, m.Date.Format("2006-01-02 15:04 MST"))
}
