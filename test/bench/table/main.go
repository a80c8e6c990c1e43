// Command table is the end of `make bench`: it reads the rows every benchmark recorded
// (testenv.RecordBench, one JSON object a line, each marked with its run), puts the same
// row of every run on one line — the median, the spread, the verdict on the median — and
// prints them as one table under the machine and the commit they were taken on, writes
// them to bin/bench/latest.json and, with -readme, puts the table into README.md between
// its bench markers. With -begin it only records the commit make bench starts on, which
// the end checks the tree still is.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/trustplane/trustplane/internal/testenv"
)

// README markers around the generated section.
const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

var (
	rowsPath   = flag.String("rows", "bin/bench/rows.jsonl", "JSON-lines file of the benchmarks' rows.")
	jsonPath   = flag.String("json", "bin/bench/latest.json", "Where the table goes as JSON (empty: nowhere).")
	readme     = flag.String("readme", "", "README to rewrite between "+beginMarker+" and "+endMarker+" (empty: none).")
	note       = flag.String("note", "", "A line printed under the header: how the rows were taken, when not by one `make bench`.")
	begin      = flag.String("begin", "", "Record the commit and tree make bench starts on in this file, and do nothing else.")
	sourcePath = flag.String("source", "", "The file -begin wrote: the commit the rows are of, checked against the tree now (empty: the tree now).")
	runs       = flag.Int("runs", 1, "Runs of every bench make bench made (a row recorded by fewer says so).")
)

func main() {
	flag.Parse()
	var err error
	if *begin != "" {
		err = writeSource(*begin)
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench table:", err)
		os.Exit(1)
	}
}

func run() error {
	raw, err := os.ReadFile(*rowsPath)
	if err != nil {
		return fmt.Errorf("reading rows: %w", err)
	}
	rows, err := parseRows(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", *rowsPath, err)
	}
	src, changed, err := loadSource(*sourcePath)
	if err != nil {
		return err
	}
	rep := report{Commit: src.Commit, Machine: thisMachine(), Started: src.Started, Finished: now().UTC(), Runs: *runs, Rows: summarize(rows)}
	out := rep.header(changed) + "\n"
	if *note != "" {
		out += *note + "\n\n"
	}
	out += formatTable(rep.Rows, *runs)
	fmt.Print(out)
	if err := rep.write(*jsonPath, *readme, out); err != nil {
		return err
	}
	if n := failed(rep.Rows); n > 0 {
		fmt.Printf("%d of %d rows miss their target (on the median of their runs)\n", n, len(rep.Rows))
	}
	if changed != "" {
		return fmt.Errorf("the rows are not of one tree: %s", changed)
	}
	return nil
}

// write puts the report into latest.json and the table into the README, where asked.
func (rep report) write(jsonFile, readmeFile, table string) error {
	if jsonFile != "" {
		js, err := rep.json()
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, js, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", jsonFile, err)
		}
		fmt.Printf("\n%d rows written to %s\n", len(rep.Rows), jsonFile)
	}
	if readmeFile == "" {
		return nil
	}
	old, err := os.ReadFile(readmeFile)
	if err != nil {
		return fmt.Errorf("reading %s: %w", readmeFile, err)
	}
	updated, err := replaceSection(string(old), table)
	if err != nil {
		return fmt.Errorf("%s: %w", readmeFile, err)
	}
	if err := os.WriteFile(readmeFile, []byte(updated), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", readmeFile, err)
	}
	fmt.Printf("table written to %s\n", readmeFile)
	return nil
}

// failed counts the rows that have a target and miss it.
func failed(rows []summary) int {
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
