// Package secretchecksum is the control plane of Tengine-Ingress's secret global
// consistency: it keeps, per namespace, the IDs of every TLS Secret (and Ingress) and
// publishes their checksum as a SecretCheckSum (IngressCheckSum) that data planes compare
// with their own view before they trust what they see.
package secretchecksum

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/debounce"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/manager"
)

const (
	// Name is the controller's name in --controllers.
	Name = "secret-checksum"
	// ManagedByLabel marks the checksum objects this controller publishes; it only ever
	// deletes objects carrying it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "trustplane"
	// ScopeAnnotation records, on each published object, which objects it covers.
	ScopeAnnotation = "checksum.trustplane.io/scope"
	// ReasonLeftOut is the Warning event on a Secret or Ingress the checksum leaves out.
	ReasonLeftOut = "LeftOutOfChecksum"

	trackSecrets   = "secrets"
	trackIngresses = "ingresses"
)

// generateNames are the name prefixes of published objects, as Tengine-Ingress's own.
var generateNames = map[string]string{trackSecrets: "secret-", trackIngresses: "ingress-"}

// Options are the controller's flags.
type Options struct {
	// Namespaces to cover; empty means every namespace (one checksum per namespace).
	Namespaces []string
	// LabelSelector narrows the Secrets and Ingresses covered.
	LabelSelector string
	// VersionAnnotation is the annotation holding an object's version.
	VersionAnnotation string
	// Ingresses also publishes IngressCheckSums.
	Ingresses bool
	// QuietPeriod and MaxDelay batch a burst of changes into one publication.
	QuietPeriod, MaxDelay time.Duration
	// Clock stamps publications.
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{VersionAnnotation: checksum.DefaultVersionAnnotation, Ingresses: true,
		QuietPeriod: time.Second, MaxDelay: 10 * time.Second, Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Namespaces, "secret-checksum-namespaces", o.Namespaces, "Namespaces whose TLS Secrets (and Ingresses) get a checksum; empty means all, one checksum per namespace.")
	fs.StringVar(&o.LabelSelector, "secret-checksum-label-selector", o.LabelSelector, "Only Secrets and Ingresses matching this label selector are covered.")
	fs.StringVar(&o.VersionAnnotation, "secret-checksum-version-annotation", o.VersionAnnotation, "Annotation holding an object's version (Tengine-Ingress also uses fs.ingress.alibaba/version).")
	fs.BoolVar(&o.Ingresses, "secret-checksum-ingresses", o.Ingresses, "Also publish IngressCheckSums.")
	fs.DurationVar(&o.QuietPeriod, "secret-checksum-quiet-period", o.QuietPeriod, "Changes are published once the namespace has been quiet this long (a burst → one publication).")
	fs.DurationVar(&o.MaxDelay, "secret-checksum-max-delay", o.MaxDelay, "Longest a publication waits while changes keep coming.")
}

// Controller is the registry entry for `trustplane manager`.
func Controller() manager.Controller {
	opts := DefaultOptions()
	return manager.Controller{
		Name:     Name,
		Help:     "SecretCheckSum/IngressCheckSum: Tengine-Ingress secret global consistency, control plane",
		AddFlags: opts.AddFlags,
		Setup:    func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err },
	}
}

// Reconciler publishes the checksums of namespaces.
type Reconciler struct {
	Client   client.Client
	Reader   client.Reader // the private cache: published objects
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Debounce *debounce.Debouncer
	Metrics  *Metrics
	opts     Options
	scope    string

	mu        sync.Mutex
	sets      map[string]*checksum.Set // track/namespace → IDs
	leftOut   map[string]string        // track/namespace/name → reason
	published map[string]string        // track/namespace → last published checksum
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tengine.taobao.org,resources=secretchecksums;ingresschecksums,verbs=get;list;watch;create;delete

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	selector := labels.Everything()
	if opts.LabelSelector != "" {
		var err error
		if selector, err = labels.Parse(opts.LabelSelector); err != nil {
			return nil, fmt.Errorf("--secret-checksum-label-selector: %w", err)
		}
	}
	inputs, err := newInputCache(mgr, opts.Namespaces, selector, opts.VersionAnnotation)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client: mgr.GetClient(), Reader: inputs, Recorder: mgr.GetEventRecorder("trustplane-" + Name),
		Clock: opts.Clock, Debounce: debounce.New(opts.QuietPeriod, opts.MaxDelay, opts.Clock), Metrics: defaultMetrics,
		opts: opts, scope: scopeOf(opts),
		sets: map[string]*checksum.Set{}, leftOut: map[string]string{}, published: map[string]string{},
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		WatchesRawSource(kindSource(inputs, &corev1.Secret{}, r.onSecret)).
		WatchesRawSource(kindSource(inputs, &tenginev1.SecretCheckSum{}, onPublished[*tenginev1.SecretCheckSum](trackSecrets)))
	if opts.Ingresses {
		b = b.WatchesRawSource(kindSource(inputs, &networkingv1.Ingress{}, r.onIngress)).
			WatchesRawSource(kindSource(inputs, &tenginev1.IngressCheckSum{}, onPublished[*tenginev1.IngressCheckSum](trackIngresses)))
	}
	return r, b.Complete(r)
}

func scopeOf(o Options) string {
	ns := "*"
	if len(o.Namespaces) > 0 {
		ns = strings.Join(o.Namespaces, ",")
	}
	return fmt.Sprintf("namespaces=%s; selector=%s; version-annotation=%s", ns, o.LabelSelector, o.VersionAnnotation)
}

// Reconcile publishes one track ("secrets" or "ingresses") of one namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Name + "/" + req.Namespace
	if wait := r.Debounce.Wait(key); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	ids, sum := r.set(key).Snapshot()
	r.Metrics.ids.WithLabelValues(req.Name, req.Namespace).Set(float64(len(ids)))

	published, err := r.listPublished(ctx, req.Name, req.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(ids) == 0 && len(published) == 0 && !r.explicit(req.Namespace) {
		// Covering every namespace must not litter the ones without versioned objects.
		return reconcile.Result{}, nil
	}
	newest := ""
	if len(published) > 0 {
		newest = published[len(published)-1].checksum
	}
	r.mu.Lock()
	last := r.published[key]
	r.mu.Unlock()
	if newest == sum || (last == sum && newest != "") {
		// Nothing new: at most clean up leftovers of an interrupted publication.
		return reconcile.Result{}, r.deleteOlder(ctx, published, 1)
	}
	created, err := r.publish(ctx, req.Name, req.Namespace, ids, sum)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	r.published[key] = sum
	r.mu.Unlock()
	r.Metrics.publications.WithLabelValues(req.Name, req.Namespace).Inc()
	r.Recorder.Eventf(created, nil, corev1.EventTypeNormal, "Published", "Publish", "Published checksum %s over %d IDs", sum, len(ids))
	log.FromContext(ctx).Info("published checksum", "track", req.Name, "namespace", req.Namespace, "checksum", sum, "ids", len(ids))
	// The data plane reacts to Add and Delete only: first the new object, then the old go.
	return reconcile.Result{}, r.deleteOlder(ctx, published, 0)
}

// explicit says the namespace was named in --secret-checksum-namespaces: it gets a
// checksum even when it holds no object yet (the MD5 of the empty string).
func (r *Reconciler) explicit(ns string) bool {
	for _, n := range r.opts.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// publishedObject is a checksum object this controller made.
type publishedObject struct {
	obj      client.Object
	checksum string
	created  metav1.Time
}

// listPublished returns this controller's objects of a track in a namespace, oldest first.
func (r *Reconciler) listPublished(ctx context.Context, track, ns string) ([]publishedObject, error) {
	var out []publishedObject
	opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{ManagedByLabel: managedByValue}}
	if track == trackSecrets {
		list := &tenginev1.SecretCheckSumList{}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, publishedObject{&list.Items[i], list.Items[i].Spec.Checksum, list.Items[i].CreationTimestamp})
		}
	} else {
		list := &tenginev1.IngressCheckSumList{}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, publishedObject{&list.Items[i], list.Items[i].Spec.Checksum, list.Items[i].CreationTimestamp})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(&out[j].created) {
			return out[i].created.Before(&out[j].created)
		}
		return out[i].obj.GetName() < out[j].obj.GetName()
	})
	return out, nil
}

func (r *Reconciler) publish(ctx context.Context, track, ns string, ids []string, sum string) (client.Object, error) {
	meta := metav1.ObjectMeta{
		Namespace: ns, GenerateName: generateNames[track],
		Labels:      map[string]string{ManagedByLabel: managedByValue},
		Annotations: map[string]string{ScopeAnnotation: r.scope},
	}
	now := metav1.NewTime(r.Clock.Now().UTC().Truncate(time.Second))
	var obj client.Object
	if track == trackSecrets {
		obj = &tenginev1.SecretCheckSum{ObjectMeta: meta, Spec: tenginev1.SecretCheckSumSpec{Checksum: sum, IDs: ids, Timestamp: now}}
	} else {
		obj = &tenginev1.IngressCheckSum{ObjectMeta: meta, Spec: tenginev1.IngressCheckSumSpec{Checksum: sum, IDs: ids, Timestamp: now}}
	}
	if err := r.Client.Create(ctx, obj); err != nil {
		return nil, fmt.Errorf("publishing %s checksum in %s: %w", track, ns, err)
	}
	return obj, nil
}

// deleteOlder deletes all but the newest keep objects.
func (r *Reconciler) deleteOlder(ctx context.Context, published []publishedObject, keep int) error {
	for i := 0; i < len(published)-keep; i++ {
		if err := r.Client.Delete(ctx, published[i].obj, client.Preconditions{UID: ptrTo(published[i].obj.GetUID())}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting superseded %s: %w", published[i].obj.GetName(), err)
		}
	}
	return nil
}

func (r *Reconciler) set(key string) *checksum.Set {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sets[key]
	if !ok {
		s = checksum.NewSet()
		r.sets[key] = s
	}
	return s
}

// onSecret keeps the namespace's ID set current from Secret events: only the changed
// Secret's certificate is parsed.
func (r *Reconciler) onSecret(old, cur *corev1.Secret, q handlers.Queue) {
	obj, gone := cur, cur == nil
	if gone {
		obj = old
	}
	if !gone && old != nil && old.Name == cur.Name && string(old.Data[corev1.TLSCertKey]) == string(cur.Data[corev1.TLSCertKey]) &&
		old.Annotations[r.opts.VersionAnnotation] == cur.Annotations[r.opts.VersionAnnotation] {
		return
	}
	var id string
	var err error
	crt, isTLS := obj.Data[corev1.TLSCertKey]
	if !gone && isTLS {
		r.Metrics.parsed.Inc()
		id, err = checksum.SecretID(obj.Name, obj.Annotations, r.opts.VersionAnnotation, crt)
	}
	r.record(trackSecrets, obj, !gone && isTLS, id, err, q)
}

func (r *Reconciler) onIngress(old, cur *networkingv1.Ingress, q handlers.Queue) {
	obj, gone := cur, cur == nil
	if gone {
		obj = old
	}
	if !gone && old != nil && old.Annotations[r.opts.VersionAnnotation] == cur.Annotations[r.opts.VersionAnnotation] {
		return
	}
	var id string
	var err error
	if !gone {
		id, err = checksum.IngressID(obj.Name, obj.Annotations, r.opts.VersionAnnotation)
	}
	r.record(trackIngresses, obj, !gone, id, err, q)
}

// record updates a track's set for one object and schedules the namespace's publication.
func (r *Reconciler) record(track string, obj client.Object, present bool, id string, err error, q handlers.Queue) {
	key := track + "/" + obj.GetNamespace()
	objKey := key + "/" + obj.GetName()
	set := r.set(key)
	changed := false
	reason := ""
	switch {
	case !present:
		changed = set.Remove(obj.GetName())
	case err != nil:
		changed = set.Remove(obj.GetName())
		leftOut, _ := checksum.IsLeftOut(err)
		reason = leftOut.Reason
		r.mu.Lock()
		before := r.leftOut[objKey]
		r.mu.Unlock()
		if before != reason {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonLeftOut, "Checksum", "left out of the %s checksum: %s", track, leftOut.Message)
		}
	default:
		changed = set.Put(obj.GetName(), id)
	}
	r.mu.Lock()
	if before, had := r.leftOut[objKey]; had {
		r.Metrics.leftOut.WithLabelValues(track, obj.GetNamespace(), before).Dec()
		delete(r.leftOut, objKey)
	}
	if reason != "" {
		r.leftOut[objKey] = reason
		r.Metrics.leftOut.WithLabelValues(track, obj.GetNamespace(), reason).Inc()
	}
	r.mu.Unlock()
	if changed {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: track}}, r.Debounce.Touch(key))
	}
}

// onPublished brings a namespace back when its published objects change (someone
// deleted ours, or a leftover needs cleaning).
func onPublished[T client.Object](track string) func(old, cur T, q handlers.Queue) {
	return func(old, cur T, q handlers.Queue) {
		var obj client.Object = cur
		if isNil(cur) {
			obj = old
		}
		if obj.GetLabels()[ManagedByLabel] != managedByValue {
			return
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: track}})
	}
}

func ptrTo[T any](v T) *T { return &v }
