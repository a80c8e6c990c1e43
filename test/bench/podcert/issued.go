//go:build bench

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// issuedWatch records when a watch first sees each PodCertificateRequest of a namespace
// issued, and which it sees denied or failed: the signer's and the floor's are timed
// alike, by the same kind of watch, and nothing asks the signer how it is doing while
// it works, as nothing asks the floor (its metrics were scraped every 50 ms before).
type issuedWatch struct {
	c       client.WithWatch
	ns      string
	mu      sync.Mutex
	issued  map[string]time.Time
	refused map[string]bool
	done    chan struct{}
	err     error
}

// watchIssued starts following ns; stop ends it.
func watchIssued(ctx context.Context, c client.WithWatch, ns string) (w *issuedWatch, stop func(), err error) {
	raw, err := c.Watch(ctx, &certificatesv1.PodCertificateRequestList{}, client.InNamespace(ns))
	if err != nil {
		return nil, nil, fmt.Errorf("watching PodCertificateRequests in %s: %w", ns, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w = &issuedWatch{c: c, ns: ns, issued: map[string]time.Time{}, refused: map[string]bool{}, done: make(chan struct{})}
	go w.follow(ctx, raw)
	return w, func() { cancel(); <-w.done }, nil
}

func (w *issuedWatch) follow(ctx context.Context, raw watch.Interface) {
	defer close(w.done)
	for {
		select {
		case <-ctx.Done():
			raw.Stop()
			return
		case ev, ok := <-raw.ResultChan():
			if !ok { // the API server ended the watch: catch up by listing, then watch again
				var err error
				if raw, err = w.rewatch(ctx); err != nil {
					w.mu.Lock()
					w.err = err
					w.mu.Unlock()
					return
				}
				continue
			}
			if pcr, ok := ev.Object.(*certificatesv1.PodCertificateRequest); ok {
				w.see(pcr)
			}
		}
	}
}

func (w *issuedWatch) rewatch(ctx context.Context) (watch.Interface, error) {
	list := &certificatesv1.PodCertificateRequestList{}
	if err := w.c.List(ctx, list, client.InNamespace(w.ns)); err != nil {
		return nil, fmt.Errorf("listing PodCertificateRequests in %s: %w", w.ns, err)
	}
	for i := range list.Items {
		w.see(&list.Items[i])
	}
	raw, err := w.c.Watch(ctx, &certificatesv1.PodCertificateRequestList{}, client.InNamespace(w.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, fmt.Errorf("watching PodCertificateRequests in %s again: %w", w.ns, err)
	}
	return raw, nil
}

func (w *issuedWatch) see(pcr *certificatesv1.PodCertificateRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	conditions := pcr.Status.Conditions
	switch {
	case meta.IsStatusConditionTrue(conditions, certificatesv1.PodCertificateRequestConditionTypeIssued):
		if _, seen := w.issued[pcr.Name]; !seen {
			w.issued[pcr.Name] = time.Now()
		}
	case meta.IsStatusConditionTrue(conditions, certificatesv1.PodCertificateRequestConditionTypeDenied),
		meta.IsStatusConditionTrue(conditions, certificatesv1.PodCertificateRequestConditionTypeFailed):
		w.refused[pcr.Name] = true
	}
}

// count is how many were seen issued so far, and the watch's error, if it ended; a
// request seen denied or failed is an error too.
func (w *issuedWatch) count() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && len(w.refused) > 0 {
		return len(w.issued), fmt.Errorf("%d PodCertificateRequests in %s were denied or failed", len(w.refused), w.ns)
	}
	return len(w.issued), w.err
}

// first is when the first was seen issued (zero: none yet).
func (w *issuedWatch) first() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, at := range w.issued {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// wait returns once n were seen issued.
func (w *issuedWatch) wait(n int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		seen, err := w.count()
		switch {
		case err != nil:
			return err
		case seen >= n:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("only %d of %d PodCertificateRequests in %s seen issued after %v", seen, n, w.ns, timeout)
		}
	}
}

// since is each one's time from start to its issue, and the last of them.
func (w *issuedWatch) since(start time.Time) (latencies []time.Duration, last time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.issued {
		d := max(at.Sub(start), 0) // issued while the manager's readiness was being polled
		latencies = append(latencies, d)
		last = max(last, d)
	}
	return latencies, last
}
