package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trustplane/trustplane/internal/testenv"
)

// summary is one row over make bench's runs: the median run's figures, and the spread.
type summary struct {
	// The median's value, floor or peer, ratio and target, and the verdict on it. With an
	// even number of runs, the mean of the two middle ones, passing if both do.
	testenv.BenchRow
	// Min and Max are the lowest and highest value over the runs; Values each run's, in
	// the order of the runs.
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
	// RatioMin and RatioMax are the spread of the ratio, for a row that has one.
	RatioMin *float64 `json:"ratioMin,omitempty"`
	RatioMax *float64 `json:"ratioMax,omitempty"`
	// Runs is how many runs recorded the row, RunsPassed how many of them met its target.
	Runs       int `json:"runs"`
	RunsPassed int `json:"runsPassed"`
}

// rowKey names a row across runs: a run may record the same figure of the same work twice
// (under two targets), told apart by their order.
type rowKey struct {
	system, work, figure string
	size, nth            int
}

// summarize puts the rows of every run that are the same row together, in the order
// they were first recorded.
func summarize(rows []testenv.BenchRow) []summary {
	groups := map[rowKey][]testenv.BenchRow{}
	var order []rowKey
	seen := map[int]map[rowKey]int{} // per run, how often a row was recorded so far
	for _, r := range rows {
		if seen[r.Run] == nil {
			seen[r.Run] = map[rowKey]int{}
		}
		base := rowKey{system: r.System, work: r.Work, figure: r.Figure, size: r.Size}
		k := base
		k.nth = seen[r.Run][base]
		seen[r.Run][base]++
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]summary, 0, len(order))
	for _, k := range order {
		out = append(out, summarizeRuns(groups[k]))
	}
	return out
}

// summarizeRuns is one row's summary over the runs that recorded it.
func summarizeRuns(runs []testenv.BenchRow) summary {
	s := summary{Runs: len(runs), Min: runs[0].Value, Max: runs[0].Value}
	for _, r := range runs {
		s.Values = append(s.Values, r.Value)
		s.Min, s.Max = min(s.Min, r.Value), max(s.Max, r.Value)
		if r.Pass {
			s.RunsPassed++
		}
		if r.Ratio != nil {
			s.RatioMin, s.RatioMax = lower(s.RatioMin, *r.Ratio), higher(s.RatioMax, *r.Ratio)
		}
	}
	s.BenchRow = median(runs)
	return s
}

// median is the median run's row, ranked by what its target judges: the ratio where the
// row has one (to its floor or peer, or 10x/1x), else the value. Which direction is better
// does not matter: the middle of three is the middle either way.
func median(runs []testenv.BenchRow) testenv.BenchRow {
	sorted := append([]testenv.BenchRow(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return judged(sorted[i]) < judged(sorted[j]) })
	mid := sorted[(len(sorted)-1)/2]
	mid.Run = 0
	if len(sorted)%2 == 1 {
		return mid
	}
	other := sorted[len(sorted)/2]
	mid.Value = (mid.Value + other.Value) / 2
	mid.Floor, mid.Peer, mid.Ratio = mean(mid.Floor, other.Floor), mean(mid.Peer, other.Peer), mean(mid.Ratio, other.Ratio)
	mid.Pass = mid.Pass && other.Pass
	return mid
}

func judged(r testenv.BenchRow) float64 {
	if r.Ratio != nil {
		return *r.Ratio
	}
	return r.Value
}

func mean(a, b *float64) *float64 {
	if a == nil || b == nil {
		return a
	}
	return testenv.Ptr((*a + *b) / 2)
}

func lower(cur *float64, v float64) *float64 {
	if cur == nil || v < *cur {
		return testenv.Ptr(v)
	}
	return cur
}

func higher(cur *float64, v float64) *float64 {
	if cur == nil || v > *cur {
		return testenv.Ptr(v)
	}
	return cur
}

// verdict is pass or FAIL on the median against the row's target; a row without a target
// is a figure. When the runs disagree, it says how many passed: such a row is on its line.
// A row fewer runs recorded than were made says so too.
func verdict(s summary, runs int) string {
	if s.Target == "" {
		return "—"
	}
	v := "**FAIL**"
	if s.Pass {
		v = "pass"
	}
	var notes []string
	if s.RunsPassed != 0 && s.RunsPassed != s.Runs {
		notes = append(notes, fmt.Sprintf("%d of %d runs pass", s.RunsPassed, s.Runs))
	}
	if s.Runs < runs {
		notes = append(notes, fmt.Sprintf("recorded by %d of %d runs", s.Runs, runs))
	}
	if len(notes) > 0 {
		v += " (" + strings.Join(notes, "; ") + ")"
	}
	return v
}
