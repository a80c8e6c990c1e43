//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testenv"
)

// creators is how many goroutines create the Secrets and JWKSConfigs of a run, and write
// the floor's objects.
const creators = 32

// manyRun is one size's figures.
type manyRun struct {
	n              int
	elapsed, floor time.Duration
	created        time.Duration // until the bench had created every Secret and JWKSConfig
	cpu            float64       // the manager's CPU seconds during the run
	mem            int64         // the manager's peak RSS during the run above its RSS before it
	peak           int64         // the manager's peak RSS during the run
}

func (r manyRun) work() string {
	return fmt.Sprintf("%d JWKSConfigs created at once (nginx off)", r.n)
}

func (r manyRun) rows() []testenv.BenchRow {
	ratio := r.elapsed.Seconds() / r.floor.Seconds()
	p := r.perObject()
	fmt.Printf("create %d JWKSConfigs at once (nginx off): all created after %.1fs, all Ready after %.1fs; floor %.1fs, ratio %.2f; manager CPU %.2f s, peak RSS %.0f MiB (+%.1f MiB during the run)\n",
		r.n, r.created.Seconds(), r.elapsed.Seconds(), r.floor.Seconds(), ratio, r.cpu, float64(r.peak)/(1<<20), float64(r.mem)/(1<<20))
	rows := []testenv.BenchRow{
		{System: "jwks", Work: r.work(), Size: r.n, Figure: "all Ready", Value: r.elapsed.Seconds(), Unit: "s",
			Floor: testenv.Ptr(r.floor.Seconds()), Ratio: testenv.Ptr(ratio), Target: "ratio <= 1.5", Pass: ratio <= 1.5},
	}
	if r.n == *configs {
		rows = append(rows, testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "all Ready", Value: r.elapsed.Seconds(), Unit: "s",
			Target: "< 60 s", Pass: r.elapsed < time.Minute})
	}
	return append(rows,
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "time per object", Value: p.Time * 1000, Unit: "ms"},
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "CPU per object", Value: p.CPU * 1000, Unit: "ms"},
		testenv.BenchRow{System: "jwks", Work: r.work(), Size: r.n, Figure: "peak memory per object", Value: p.Memory / 1024, Unit: "KiB"})
}

func (r manyRun) perObject() testenv.PerObject {
	n := float64(r.n)
	return testenv.PerObject{Time: r.elapsed.Seconds() / n, CPU: r.cpu / n, Memory: float64(r.mem) / n}
}

func growthRows(small, large manyRun) []testenv.BenchRow {
	work := fmt.Sprintf("JWKSConfigs created at once (nginx off), %d vs %d", large.n, small.n)
	return testenv.GrowthRows("jwks", work, large.n, small.perObject(), large.perObject())
}

// createMany creates n Secrets and JWKSConfigs (nginx off) from 32 goroutines while m
// runs, and times until all are Ready, as a watch sees them.
func (b *bench) createMany(ctx context.Context, m *managerProcess, n int) (manyRun, error) {
	run := manyRun{n: n}
	ns := fmt.Sprintf("many-%d", n)
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return run, err
	}
	w, err := b.c.Watch(ctx, &jwksv1alpha1.JWKSConfigList{}, client.InNamespace(ns))
	if err != nil {
		return run, err
	}
	defer w.Stop()
	requestsBefore, err := b.requestsByKind(ctx)
	if err != nil {
		return run, err
	}
	pid := m.cmd.Process.Pid
	resetPeakRSS(pid)
	rss, cpu := testenv.ResidentSet(pid), testenv.ProcessCPU(pid)
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		created <- testenv.Parallel(creators, n, func(i int) error {
			_, err := b.createPair(ctx, ns, i, b.certs[i%len(b.certs)], false)
			return err
		})
	}()
	ready := map[string]bool{}
	deadline := time.After(15 * time.Minute)
	for len(ready) < n {
		select {
		case err := <-created:
			if err != nil {
				return run, err
			}
			run.created = time.Since(start)
		case ev, ok := <-w.ResultChan():
			if !ok { // the API server ended the watch: count the rest by listing
				if err := b.waitAllReady(ctx, ns, n); err != nil {
					return run, err
				}
				ready = nil
				break
			}
			if cfg, ok := ev.Object.(*jwksv1alpha1.JWKSConfig); ok && meta.IsStatusConditionTrue(cfg.Status.Conditions, "Ready") {
				ready[cfg.Name] = true
			}
		case <-deadline:
			return run, fmt.Errorf("only %d of %d JWKSConfigs Ready after 15 minutes", len(ready), n)
		}
		if ready == nil {
			break
		}
	}
	run.elapsed = time.Since(start)
	run.cpu, run.peak = testenv.ProcessCPU(pid)-cpu, testenv.PeakRSS(pid)
	run.mem = run.peak - rss
	requestsAfter, err := b.requestsByKind(ctx)
	if err != nil {
		return run, err
	}
	printRequests(n, requestsBefore, requestsAfter)
	return run, nil
}

// requestsByKind counts the API server's requests so far by verb and resource
// (subresource too), watches and the API server's own requests left out.
func (b *bench) requestsByKind(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	_, err := testenv.APIRequests(ctx, b.env.Config, func(labels string) bool {
		fields := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = strings.Trim(v, `"`)
			}
		}
		if fields["verb"] == "WATCH" || fields["resource"] == "" {
			return false
		}
		kind := fields["verb"] + " " + fields["resource"]
		if fields["subresource"] != "" {
			kind += "/" + fields["subresource"]
		}
		counts[kind] = 0 // the total is summed below, from the lines this one matches
		return true
	})
	if err != nil {
		return nil, err
	}
	for kind := range counts {
		verb, resource, _ := strings.Cut(kind, " ")
		sub := ""
		resource, sub, _ = strings.Cut(resource, "/")
		n, err := testenv.APIRequests(ctx, b.env.Config, func(labels string) bool {
			return strings.Contains(labels, `verb="`+verb+`"`) && strings.Contains(labels, `resource="`+resource+`"`) &&
				strings.Contains(labels, `subresource="`+sub+`"`)
		})
		if err != nil {
			return nil, err
		}
		counts[kind] = n
	}
	return counts, nil
}

// printRequests prints the API requests of a run per JWKSConfig, by verb and resource:
// the bench's own (a Secret and a JWKSConfig created) and the manager's.
func printRequests(n int, before, after map[string]int) {
	var kinds []string
	for kind, v := range after {
		if v > before[kind] {
			kinds = append(kinds, kind)
		}
	}
	sort.Strings(kinds)
	var parts []string
	total := 0
	for _, kind := range kinds {
		d := after[kind] - before[kind]
		total += d
		parts = append(parts, fmt.Sprintf("%s %.2f", kind, float64(d)/float64(n)))
	}
	fmt.Printf("API requests per JWKSConfig (the bench's two creates included): %.2f: %s\n", float64(total)/float64(n), strings.Join(parts, ", "))
}

// floor writes what n JWKSConfigs at once amount to with no controller: from 32
// goroutines, for each the TLS Secret and the JWKSConfig (as createMany does), then what
// the controller writes for it, the JWK Set ConfigMap (with the document, computed
// beforehand) and a Ready status. Its objects are deleted afterwards.
func (b *bench) floor(ctx context.Context, n int) (time.Duration, error) {
	ns := fmt.Sprintf("floor-%d", n)
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, err
	}
	now := time.Now()
	type published struct {
		kid, doc, retirements string
	}
	docs := make([]published, len(b.certs))
	for i, chain := range b.certs {
		key, err := jwkset.ParseChain(chain.PEM(), "", now)
		if err != nil {
			return 0, err
		}
		set := []jwkset.PublishedKey{{Key: key}}
		doc, err := jwkset.Marshal(set)
		if err != nil {
			return 0, err
		}
		docs[i] = published{kid: key.KeyID(), doc: string(doc), retirements: jwkset.EncodeRetirements(set)}
	}
	start := time.Now()
	err := testenv.Parallel(creators, n, func(i int) error {
		pub := docs[i%len(docs)]
		cfg, err := b.createPair(ctx, ns, i, b.certs[i%len(b.certs)], false)
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cfg.Name + "-jwks",
			Labels:      map[string]string{jwksv1alpha1.OwnerLabel: cfg.Name, "app.kubernetes.io/managed-by": "trustplane"},
			Annotations: map[string]string{jwksv1alpha1.RetirementsAnnotation: pub.retirements}},
			Data: map[string]string{jwkset.DocumentKey: pub.doc}}
		if err := b.c.Create(ctx, cm); err != nil {
			return err
		}
		t := metav1.Now()
		cfg.Status = jwksv1alpha1.JWKSConfigStatus{ObservedGeneration: cfg.Generation, LastUpdateTime: &t, LastKeyID: pub.kid, KeyCount: 1,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: jwksv1alpha1.ReasonPublished,
				Message: "Publishing 1 key(s); current kid " + pub.kid, LastTransitionTime: t, ObservedGeneration: cfg.Generation}}}
		return b.c.Status().Update(ctx, cfg)
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	fmt.Printf("floor: %d Secrets, JWKSConfigs, ConfigMaps and Ready statuses written by a plain client from %d goroutines in %.1fs\n", n, creators, elapsed.Seconds())
	for _, list := range []client.Object{&jwksv1alpha1.JWKSConfig{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		if err := b.c.DeleteAllOf(ctx, list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
	}
	return elapsed, nil
}

// resetPeakRSS sets a process's VmHWM back to its resident set now (proc(5), clear_refs 5),
// so that the peak of one run is read apart from what came before it.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o600)
}
