// Package secretchecksum is the control plane of Tengine-Ingress's secret global
// consistency: it keeps the IDs of every versioned TLS Secret (and Ingress) and publishes
// their checksum as a SecretCheckSum (IngressCheckSum) that data planes compare with
// their own view before they trust what they see.
//
// A Tengine-Ingress hashes everything its informers hold, which is every namespace unless
// it was started with --watch-namespace. So by default one checksum covers every watched
// namespace together ("cluster" scope, published in one namespace); "namespace" scope
// publishes one per namespace for instances that watch a single namespace.
package secretchecksum

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/debounce"
	"github.com/trustplane/trustplane/internal/handlers"
)

// Reconciler publishes checksums.
type Reconciler struct {
	Client   client.Client
	Reader   client.Reader // the private cache: inputs and published objects
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Debounce *debounce.Debouncer
	Metrics  *Metrics
	opts     Options
	inputs   *inputs
	reports  *reporter

	mu        sync.Mutex
	sets      map[publication]*checksum.Set
	published map[publication]string // last checksum this process published

	// ingressMu orders the Ingress and IngressClass handlers: each evaluates Ingresses
	// against the classes cached at that moment, and the last evaluation must win.
	ingressMu sync.Mutex
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;ingressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tengine.taobao.org,resources=secretchecksums;ingresschecksums,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client: mgr.GetClient(), Clock: opts.Clock, Metrics: defaultMetrics, opts: opts,
		Debounce: debounce.New(opts.QuietPeriod, opts.MaxDelay, opts.Clock),
		sets:     map[publication]*checksum.Set{}, published: map[publication]string{},
	}
	r.inputs = newInputs(opts.VersionAnnotation, r.Metrics)
	r.Recorder = mgr.GetEventRecorder("trustplane-" + Name)
	r.reports = newReporter(mgr.GetClient(), opts.Clock, r.Metrics)
	c, err := r.inputs.cache(mgr, opts.Namespaces)
	if err != nil {
		return nil, err
	}
	r.Reader = c
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		WatchesRawSource(kindSource(c, &corev1.Secret{}, r.onSecret)).
		WatchesRawSource(kindSource(c, &tenginev1.SecretCheckSum{}, onPublished[*tenginev1.SecretCheckSum](checksum.TrackSecrets))).
		WatchesRawSource(source.Func(r.queueStandingPublications))
	if opts.Ingresses {
		if err := indexIngressesByClass(c); err != nil {
			return nil, err
		}
		b = b.WatchesRawSource(kindSource(c, &networkingv1.Ingress{}, r.onIngress)).
			WatchesRawSource(kindSource(c, &networkingv1.IngressClass{}, r.onIngressClass)).
			WatchesRawSource(kindSource(c, &tenginev1.IngressCheckSum{}, onPublished[*tenginev1.IngressCheckSum](checksum.TrackIngresses)))
	}
	return r, b.Complete(r)
}

// queueStandingPublications queues, once at start, the publications that exist whatever
// the inputs: the cluster scope's, and the namespace scope's of the namespaces named in
// --secret-checksum-namespaces. Inputs queue only the publications they change, so
// without this a cluster holding nothing that counts would get no checksum at all, not
// even the MD5 of the empty string. Workers start once the caches have synced, so these
// publish the complete sets.
func (r *Reconciler) queueStandingPublications(_ context.Context, q handlers.Queue) error {
	tracks := []checksum.Track{checksum.TrackSecrets}
	if r.opts.Ingresses {
		tracks = append(tracks, checksum.TrackIngresses)
	}
	for _, track := range tracks {
		if r.opts.publishes(ScopeCluster) {
			q.Add(publication{track, ScopeCluster, r.opts.PublishNamespace}.request())
		}
		if r.opts.publishes(ScopeNamespace) {
			for _, ns := range r.opts.Namespaces {
				q.Add(publication{track, ScopeNamespace, ns}.request())
			}
		}
	}
	return nil
}

// Reconcile publishes one track ("secrets" or "ingresses") of one scope, or sends the
// left-out reports of one namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Name == reportsRequestName {
		return reconcile.Result{}, r.reports.flush(ctx, req.Namespace)
	}
	p, ok := publicationOf(req)
	if !ok {
		return reconcile.Result{}, nil
	}
	if !r.current(p) {
		return reconcile.Result{}, r.retire(ctx, p)
	}
	if wait := r.Debounce.Wait(p.String()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	ids, sum := r.set(p).Snapshot()
	r.Metrics.ids.WithLabelValues(string(p.track), string(p.kind), p.namespace).Set(float64(len(ids)))

	published, err := r.listPublished(ctx, p)
	if err != nil {
		return reconcile.Result{}, err
	}
	if p.kind == ScopeNamespace && len(ids) == 0 && len(published) == 0 && !r.explicit(p.namespace) {
		// Covering every namespace must not litter the ones without versioned objects.
		return reconcile.Result{}, nil
	}
	newest, recordsScope := "", false
	if len(published) > 0 {
		newest = published[len(published)-1].checksum
		recordsScope = published[len(published)-1].obj.GetAnnotations()[ScopeAnnotation] == r.scope(p).String()
	}
	r.mu.Lock()
	last := r.published[p]
	r.mu.Unlock()
	// An object that does not record the scope it covers (an older version's, or one of
	// another version annotation) is published again: a data plane diffs against the
	// newest object of its own scope, and takes an unrecorded one for its own.
	if recordsScope && (newest == sum || last == sum) {
		// Nothing new: at most clean up leftovers of an interrupted publication.
		return reconcile.Result{}, r.deleteOlder(ctx, published, 1)
	}
	created, err := r.publish(ctx, p, ids, sum)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	r.published[p] = sum
	r.mu.Unlock()
	r.Metrics.publications.WithLabelValues(string(p.track), string(p.kind), p.namespace).Inc()
	r.Recorder.Eventf(created, nil, corev1.EventTypeNormal, tenginev1alpha1.ReasonPublished, "Publish", "Published checksum %s over %d IDs", sum, len(ids))
	log.FromContext(ctx).Info("published checksum", "track", p.track, "scope", p.kind, "namespace", p.namespace, "checksum", sum, "ids", len(ids))
	// The data plane reacts to Add and Delete only: first the new object, then the old go.
	return reconcile.Result{}, r.deleteOlder(ctx, published, 0)
}

// current says whether p is still published with the options in force. Objects of
// other scopes are ours from an earlier configuration: left standing, they would keep a
// data plane checking against a checksum nobody maintains.
func (r *Reconciler) current(p publication) bool {
	switch p.kind {
	case ScopeCluster:
		return r.opts.publishes(ScopeCluster) && p.namespace == r.opts.PublishNamespace
	case ScopeNamespace:
		return r.opts.publishes(ScopeNamespace) && checksum.NewScope(r.opts.Namespaces, "").Covers(p.namespace)
	}
	return false
}

// retire deletes what this controller published for a scope it no longer publishes.
func (r *Reconciler) retire(ctx context.Context, p publication) error {
	published, err := r.listPublished(ctx, p)
	if err != nil || len(published) == 0 {
		return err
	}
	log.FromContext(ctx).Info("deleting checksums of a scope no longer published", "track", p.track, "scope", p.kind, "namespace", p.namespace, "objects", len(published))
	return r.deleteOlder(ctx, published, 0)
}

// explicit says the namespace was named in --secret-checksum-namespaces: it gets a
// checksum even when it holds no object yet (the MD5 of the empty string).
func (r *Reconciler) explicit(ns string) bool { return slices.Contains(r.opts.Namespaces, ns) }

// scope is what p's checksum covers, as recorded on the object.
func (r *Reconciler) scope(p publication) checksum.Scope {
	if p.kind == ScopeNamespace {
		return checksum.NewScope([]string{p.namespace}, r.opts.VersionAnnotation)
	}
	return checksum.NewScope(r.opts.Namespaces, r.opts.VersionAnnotation)
}

func (r *Reconciler) set(p publication) *checksum.Set {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sets[p]
	if !ok {
		s = checksum.NewSet()
		r.sets[p] = s
	}
	return s
}
