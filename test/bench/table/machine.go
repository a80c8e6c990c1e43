package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// report is what latest.json holds: the commit and machine the rows were taken on, when,
// how many runs of every bench, and each row over them.
type report struct {
	Commit   string    `json:"commit"`
	Machine  machine   `json:"machine"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Runs     int       `json:"runs"`
	Rows     []summary `json:"rows"`
}

// machine is what the figures were taken on.
type machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memoryGiB"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
}

func thisMachine() machine {
	m := machine{CPU: "unknown CPU", Kernel: "unknown", Go: runtime.Version(), Cores: runtime.NumCPU()}
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

// header says where, on what and when the rows were taken, and how to read them; changed
// (when not empty) says the tree changed under the runs.
func (rep report) header(changed string) string {
	m := rep.Machine
	runs := "one run"
	if rep.Runs > 1 {
		runs = fmt.Sprintf("%d runs of every bench", rep.Runs)
	}
	end := rep.Finished.Format("15:04 MST")
	if rep.Finished.YearDay() != rep.Started.YearDay() || rep.Finished.Year() != rep.Started.Year() {
		end = rep.Finished.Format("2006-01-02 15:04 MST")
	}
	h := fmt.Sprintf("`make bench` of commit `%s` on %s, %d cores, %.0f GiB memory, %s, %s: %s, %s–%s.\n",
		rep.Commit, m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, runs, rep.Started.Format("2006-01-02 15:04"), end)
	if rep.Runs > 1 {
		h += "\nEach figure is the median of the runs, with their lowest and highest; the verdict is the median's, " +
			"and a row whose runs disagree says how many passed.\n"
	}
	if changed != "" {
		h += "\n**Not one tree:** " + changed + ".\n"
	}
	return h
}

// json is latest.json: the report, rows never null.
func (rep report) json() ([]byte, error) {
	if rep.Rows == nil {
		rep.Rows = []summary{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "p50 < 10 ms", not "p50 \u003c 10 ms"
	enc.SetIndent("", "  ")
	err := enc.Encode(rep)
	return b.Bytes(), err
}
