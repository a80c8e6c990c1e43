package tenantkubeconfig

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// tenantServer is a TLS server of a tenant's choosing and the rest.Config RESTConfig makes
// for a kubeconfig naming it, under policy p.
func tenantServer(t *testing.T, p Policy, handler http.HandlerFunc) *rest.Config {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	cfg, err := RESTConfig(fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: u, user: {token: t0ken}}]
`, srv.URL, ca), p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// discover asks the server for its API groups, as every client of a target first does.
func discover(t *testing.T, cfg *rest.Config) error {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.Discovery().ServerGroups()
	return err
}

// gzipBomb is a gzip body that inflates to n bytes of a JSON-looking document.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.WriteString(w, `{"kind":"APIGroupList","groups":[],"x":"`)
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for written := 0; written < n; written += len(chunk) {
		_, _ = w.Write(chunk)
	}
	_, _ = io.WriteString(w, `"}`)
	_ = w.Close()
	return b.Bytes()
}

// heapGrowth runs f and returns how much the heap grew at most while it ran, sampled.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if peak.Load() < before.HeapAlloc {
		return 0
	}
	return peak.Load() - before.HeapAlloc
}

// TestTenantServersAreBounded: a gzip bomb (256 MiB inflated) and a 512 MiB discovery
// document cost the manager what the policy allows, not what the server sends, and fail
// with a TargetError that names the limit; the manager never asks for compression.
func TestTenantServersAreBounded(t *testing.T) {
	p := DefaultPolicy()
	bomb := gzipBomb(t, 256<<20)
	var askedGzip atomic.Bool
	bombCfg := tenantServer(t, p, func(w http.ResponseWriter, r *http.Request) {
		askedGzip.Store(askedGzip.Load() || strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb)
	})
	hugeCfg := tenantServer(t, p, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIGroupList","groups":[`)
		group := []byte(`{"name":"g.example.com","versions":[{"groupVersion":"g.example.com/v1","version":"v1"}]},`)
		for written := 0; written < 512<<20; written += len(group) {
			if _, err := w.Write(group); err != nil {
				return // the client stopped reading
			}
		}
	})
	for name, tc := range map[string]struct {
		cfg   *rest.Config
		limit int64
	}{"gzip bomb": {bombCfg, 0}, "huge discovery": {hugeCfg, p.MaxResponseBytes}} {
		var err error
		growth := heapGrowth(func() { err = discover(t, tc.cfg) })
		te := (*TargetError)(nil)
		if !errors.As(Failure("tenant.example", err), &te) || te.Class != TooLarge || te.Limit != tc.limit {
			t.Errorf("%s: %v, want a TooLarge TargetError with limit %d", name, err, tc.limit)
		}
		if tc.limit > 0 && !strings.Contains(te.Error(), "--cluster-target-max-response-bytes") {
			t.Errorf("%s: %q does not name the flag", name, te.Error())
		}
		// client-go reads the answer into one buffer that doubles as it grows: up to
		// twice the limit, and the decoding; never the hundreds of MiB sent.
		if growth > 4*uint64(p.MaxResponseBytes) {
			t.Errorf("%s: the heap grew by %d MiB", name, growth>>20)
		}
		t.Logf("%s: heap grew by at most %.1f MiB", name, float64(growth)/(1<<20))
	}
	if askedGzip.Load() {
		t.Error("the manager asked a tenant's server for gzip")
	}
}

// TestAnAnswerOfExactlyTheLimitIsRead: the limit is the largest answer read, not one less.
func TestAnAnswerOfExactlyTheLimitIsRead(t *testing.T) {
	p := DefaultPolicy()
	p.MaxResponseBytes = 64 << 10
	body := func(n int) string {
		head, tail := `{"kind":"APIGroupList","apiVersion":"v1","groups":[],"x":"`, `"}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	for n, ok := range map[int]bool{64 << 10: true, 64<<10 + 1: false} {
		cfg := tenantServer(t, p, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			// No Content-Length: the cap is found while reading, not announced.
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, body(n))
		})
		if err := discover(t, cfg); (err == nil) != ok {
			t.Errorf("an answer of %d bytes with a limit of %d: %v", n, p.MaxResponseBytes, err)
		}
	}
}

// TestRequestsToATenantServerShareABudget: clients made from one config send at most
// MaxInFlight requests at once; the others wait.
func TestRequestsToATenantServerShareABudget(t *testing.T) {
	p := DefaultPolicy()
	p.MaxInFlight = 2
	var inFlight, most atomic.Int32
	cfg := tenantServer(t, p, func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := rest.CopyConfig(cfg) // a client of its own, as each controller has
			if err := discover(t, c); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got != int32(p.MaxInFlight) {
		t.Errorf("at most %d requests at once, want %d", got, p.MaxInFlight)
	}
}
