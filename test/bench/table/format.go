package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// formatTable is the rows as a Markdown table, in the order they were recorded: the
// median of the runs, their spread, the median's floor or peer and ratio (with the
// ratio's spread), the target and the verdict on the median.
func formatTable(rows []summary, runs int) string {
	var b strings.Builder
	b.WriteString("| system | work | size | figure (median) | min–max | floor or peer | ratio (min–max) | target | verdict |\n")
	b.WriteString("|---|---|---:|---|---|---|---:|---|---|\n")
	for _, r := range rows {
		cells := []string{r.System, r.Work, thousands(r.Size), r.Figure + " " + withUnit(r.Value, r.Unit), spread(r),
			floorOrPeer(r), ratio(r), r.Target, verdict(r, runs)}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// spread is the value's lowest–highest over the runs; empty for one run.
func spread(r summary) string {
	if r.Runs < 2 {
		return ""
	}
	return withUnit2(r.Min, r.Max, r.Unit)
}

func floorOrPeer(r summary) string {
	switch {
	case r.Floor != nil:
		return "floor " + withUnit(*r.Floor, r.Unit)
	case r.Peer != nil:
		return "peer " + withUnit(*r.Peer, r.Unit)
	}
	return ""
}

// ratio is the median's ratio and, over several runs, its lowest–highest.
func ratio(r summary) string {
	if r.Ratio == nil {
		return ""
	}
	s := number(*r.Ratio) + "×"
	if r.Runs > 1 && r.RatioMin != nil && r.RatioMax != nil {
		s += " (" + number(*r.RatioMin) + "–" + number(*r.RatioMax) + ")"
	}
	return s
}

func withUnit(v float64, unit string) string {
	if unit == "" {
		return number(v)
	}
	return number(v) + " " + unit
}

// withUnit2 is a range of values in one unit: "8.10–9.02 s".
func withUnit2(lo, hi float64, unit string) string {
	return number(lo) + "–" + withUnit(hi, unit)
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
