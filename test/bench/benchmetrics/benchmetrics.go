//go:build bench

// Package benchmetrics reads what a controller's own metrics say about a bench's run:
// how many reconciles it made, how long they took and how long requests waited in its
// queue, so that a bench can say where trustplane's time went next to its floor's.
package benchmetrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Work is a controller's reconciles so far, as its metrics count them.
type Work struct {
	Reconciles, RequeuedAfter, ReconcileSeconds float64
	Dequeued, QueuedSeconds                     float64
	// Queued and Running are the requests in its queue and being reconciled now.
	Queued, Running float64
	// HeapHeldFree is the heap the process holds free now (idle spans not yet returned to
	// the system: go_memstats_heap_idle_bytes less go_memstats_heap_released_bytes), in
	// bytes. Allocations reuse it before the resident set grows, so a run's peak memory
	// above the resident set alone before it leaves out whatever the process happened to
	// hold free: at a thousand JWKSConfigs, up to a third of what they cost.
	HeapHeldFree float64
}

// Scrape reads the controller's counters from the manager's metrics endpoint (host:port);
// a zero Work when it cannot.
func Scrape(addr, controller string) Work {
	var w Work
	body, err := get("http://" + addr + "/metrics")
	if err != nil {
		return w
	}
	label := `controller="` + controller + `"`
	var idle, released float64
	for _, line := range strings.Split(body, "\n") {
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		switch {
		case strings.HasPrefix(line, "go_memstats_heap_idle_bytes "):
			idle = v
		case strings.HasPrefix(line, "go_memstats_heap_released_bytes "):
			released = v
		}
		if !strings.Contains(line, label) {
			continue
		}
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{"):
			w.Reconciles += v
			if strings.Contains(line, `result="requeue_after"`) {
				w.RequeuedAfter += v
			}
		case strings.HasPrefix(line, "controller_runtime_reconcile_time_seconds_sum{"):
			w.ReconcileSeconds += v
		case strings.HasPrefix(line, "workqueue_queue_duration_seconds_sum{"):
			w.QueuedSeconds += v
		case strings.HasPrefix(line, "workqueue_queue_duration_seconds_count{"):
			w.Dequeued += v
		case strings.HasPrefix(line, "workqueue_depth{"):
			w.Queued += v
		case strings.HasPrefix(line, "controller_runtime_active_workers{"):
			w.Running += v
		}
	}
	w.HeapHeldFree = max(idle-released, 0)
	return w
}

// Idle says whether the controller has done at least n reconciles and has nothing queued
// or running.
func (w Work) Idle(n int) bool {
	return w.Reconciles >= float64(n) && w.Queued == 0 && w.Running == 0
}

// Since is what happened between before and w (the counters; Queued, Running and
// HeapHeldFree are w's).
func (w Work) Since(before Work) Work {
	return Work{w.Reconciles - before.Reconciles, w.RequeuedAfter - before.RequeuedAfter, w.ReconcileSeconds - before.ReconcileSeconds,
		w.Dequeued - before.Dequeued, w.QueuedSeconds - before.QueuedSeconds, w.Queued, w.Running, w.HeapHeldFree}
}

// String says it in one line; empty when nothing was counted.
func (w Work) String() string {
	if w.Reconciles == 0 || w.Dequeued == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f reconciles (%.0f requeued after a delay), mean %.1f ms each; mean wait in the queue %.1f ms",
		w.Reconciles, w.RequeuedAfter, 1000*w.ReconcileSeconds/w.Reconciles, 1000*w.QueuedSeconds/w.Dequeued)
}

// client reads the metrics uncompressed: compressing them is the manager's CPU, measured.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func get(url string) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}
