//go:build bench

package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/bench/benchfloor"
)

// The floor's controller is a process of its own, as the manager is: this bench's binary
// run again with -floor-namespace (test/bench/benchfloor).
var (
	floorNamespace  = flag.String("floor-namespace", "", "Run as the floor's controller of this namespace (the bench starts it; not for use by hand).")
	floorCount      = flag.Int("floor-count", 0, "With -floor-namespace: the JWKSConfigs to serve before exiting.")
	floorKubeconfig = flag.String("floor-kubeconfig", "", "With -floor-namespace: the API server's kubeconfig.")
)

// runFloorController is the floor's controller: what a watch of its namespace shows
// created goes to *workers goroutines, each of which does for it what any JWKS
// controller must (serveFloor); it exits once it has served -floor-count.
func runFloorController() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", *floorKubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1 // rate-limited as little as the manager's client
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	f, err := newFeed(ctx, c, *floorNamespace)
	if err != nil {
		return err
	}
	defer f.stop()
	queue := make(chan *jwksv1alpha1.JWKSConfig, *floorCount) // never full: the watch never waits for the workers
	failed := make(chan error, *workers+1)
	go func() {
		if err := f.run(*floorCount, queue); err != nil {
			failed <- err
		}
	}()
	var served servers
	served.start(ctx, *workers, queue, serveFloor(c), failed)
	benchfloor.Ready()
	done := make(chan struct{})
	go func() { served.wg.Wait(); close(done) }()
	select {
	case err := <-failed:
		return err
	case <-done:
	}
	fmt.Printf("floor: mean time a worker took to read one JWKSConfig's Secret and write its ConfigMap and status: %.1f ms\n", 1000*served.mean().Seconds())
	return nil
}

// serveFloor is what any controller must do for a JWKSConfig it is shown created: read
// its Secret (trustplane keeps no Secret in memory: private keys), turn the certificate
// into the JWK Set document, and write the ConfigMap and the status trustplane writes.
func serveFloor(c client.Client) func(context.Context, *jwksv1alpha1.JWKSConfig) error {
	return func(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) error {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Spec.CertificateSecret}, secret); err != nil {
			return fmt.Errorf("reading the Secret: %w", err)
		}
		key, err := jwkset.ParseChain(secret.Data[corev1.TLSCertKey], "", time.Now())
		if err != nil {
			return err
		}
		return publishPlain(ctx, c, cfg, key)
	}
}

// startFloor starts the floor's controller of ns for n JWKSConfigs and returns once its
// watches are open.
func (b *bench) startFloor(ns string, n int) (*benchfloor.Process, error) {
	return benchfloor.Start("-floor-namespace", ns, "-floor-count", strconv.Itoa(n), "-floor-kubeconfig", b.kubeconfig,
		"-workers", strconv.Itoa(*workers))
}

// feed is the floor's watch of the JWKSConfigs of a namespace: what it shows created goes
// to the workers' queue, as a controller's informer hands it to its workqueue.
type feed struct {
	c      client.WithWatch
	ns     string
	ctx    context.Context
	cancel context.CancelFunc
	w      watch.Interface
}

func newFeed(ctx context.Context, c client.WithWatch, ns string) (*feed, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := c.Watch(ctx, &jwksv1alpha1.JWKSConfigList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("floor: watching JWKSConfigs in %s: %w", ns, err)
	}
	for _, list := range dependents() {
		go testenv.DrainWatch(ctx, c, list, ns)
	}
	return &feed{c: c, ns: ns, ctx: ctx, cancel: cancel, w: w}, nil
}

// dependents are what any JWKS controller must watch beside its JWKSConfigs, and
// trustplane's manager does: the Secrets (their metadata), to see a certificate rotated,
// and the ConfigMaps, to see a set changed or lost. The floor watches them as well, so
// that the API server sends it, and it decodes, the same events.
func dependents() []client.ObjectList {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	return []client.ObjectList{secrets, &corev1.ConfigMapList{}}
}

// stop ends run, whatever it is waiting for (a floor that failed never sees n created).
func (f *feed) stop() { f.cancel() }

// run queues each JWKSConfig once, until n are queued or the feed is stopped, then closes
// queue (testenv.FeedCreated).
func (f *feed) run(n int, queue chan<- *jwksv1alpha1.JWKSConfig) error {
	return testenv.FeedCreated(f.ctx, f.c, f.w, &jwksv1alpha1.JWKSConfigList{}, f.ns, n, queue)
}

// servers are the floor's workers, and the time they took per JWKSConfig.
type servers struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	total time.Duration
	n     int
}

// start runs k workers calling serve on each JWKSConfig of queue; the first error of
// each goes to failed, and ends it.
func (s *servers) start(ctx context.Context, k int, queue <-chan *jwksv1alpha1.JWKSConfig,
	serve func(context.Context, *jwksv1alpha1.JWKSConfig) error, failed chan<- error) {
	for range k {
		s.wg.Go(func() {
			for cfg := range queue {
				began := time.Now()
				if err := serve(ctx, cfg); err != nil {
					failed <- fmt.Errorf("%s: %w", cfg.Name, err)
					return
				}
				s.add(time.Since(began))
			}
		})
	}
}

func (s *servers) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += d
	s.n++
}

func (s *servers) mean() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return 0
	}
	return s.total / time.Duration(s.n)
}

// publishPlain writes cfg's ConfigMap and Ready status for key, as trustplane would
// (the same document, labels and annotation; the same status, status.keys included),
// with no controller logic.
func publishPlain(ctx context.Context, c client.Client, cfg *jwksv1alpha1.JWKSConfig, key jwkset.Key) error {
	set := []jwkset.PublishedKey{{Key: key}}
	doc, err := jwkset.Marshal(set)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name + "-jwks",
		Labels:      map[string]string{jwksv1alpha1.OwnerLabel: cfg.Name, "app.kubernetes.io/managed-by": "trustplane"},
		Annotations: map[string]string{jwksv1alpha1.RetirementsAnnotation: jwkset.EncodeRetirements(set)}},
		Data: map[string]string{jwkset.DocumentKey: string(doc)}}
	if err := c.Create(ctx, cm); err != nil {
		return err
	}
	t := metav1.Now()
	kid := key.KeyID()
	cfg.Status = jwksv1alpha1.JWKSConfigStatus{ObservedGeneration: cfg.Generation, LastUpdateTime: &t, LastKeyID: kid, KeyCount: 1,
		Keys: []jwksv1alpha1.PublishedKey{{KeyID: kid, Algorithm: key.JWK.Algorithm, NotAfter: &metav1.Time{Time: key.NotAfter.UTC()}, PublicKey: jwkset.PublicJWK(key)}},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: jwksv1alpha1.ReasonPublished,
			Message: "Publishing 1 key(s); current kid " + kid, LastTransitionTime: t, ObservedGeneration: cfg.Generation}}}
	return c.Status().Update(ctx, cfg)
}
