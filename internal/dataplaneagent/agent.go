// Package dataplaneagent is `trustplane dataplane`: a gateway-side agent that writes the
// TLS and CA Secrets of the namespaces it watches (all of them by default, as
// Tengine-Ingress) to a directory for nginx/Tengine only while they agree with the control
// plane's SecretCheckSum, and otherwise keeps serving the last verified set — also across
// API server outages, restarts during one, and a reload command that fails.
package dataplaneagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/debounce"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// Options are the agent's flags.
type Options struct {
	// Namespace is the one namespace to follow (the sidecar's); Namespaces a list. Neither:
	// every namespace, as Tengine-Ingress without --watch-namespace.
	Namespace              string
	Namespaces             []string
	Dir                    string
	VersionAnnotation      string
	FailOpen               bool
	Ingresses              bool
	IngressClasses         checksum.IngressClassOptions
	ReloadCommand          string
	QuietPeriod            time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
}

// DefaultOptions are the flag defaults; Tengine-Ingress is fail-open.
func DefaultOptions() Options {
	return Options{VersionAnnotation: checksum.DefaultVersionAnnotation, FailOpen: true, Ingresses: true,
		IngressClasses: checksum.DefaultIngressClassOptions(), QuietPeriod: 200 * time.Millisecond,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081"}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The one namespace whose Secrets, Ingresses and checksums to follow (a sidecar's). Neither this nor --namespaces: every namespace, as Tengine-Ingress.")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces, "Namespaces to follow, comma-separated; the files are then named <namespace>.<name>.* (unless the list has one namespace).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Directory for the verified <name>.crt/.key/.ca.crt files and the snapshot (required).")
	fs.StringVar(&o.VersionAnnotation, "version-annotation", o.VersionAnnotation, "Annotation holding a Secret's version.")
	fs.BoolVar(&o.FailOpen, "fail-open", o.FailOpen, "Trust the secrets when no SecretCheckSum exists (Tengine-Ingress's behaviour); false keeps the last verified set.")
	fs.BoolVar(&o.Ingresses, "ingresses", o.Ingresses, "Also verify the Ingresses against the IngressCheckSums (reported in metrics and events).")
	o.IngressClasses.AddFlags(fs, "")
	fs.StringVar(&o.ReloadCommand, "reload-command", o.ReloadCommand, "Command run after the verified files change, e.g. 'nginx -s reload' (split on spaces, no shell). When it fails the previous files are put back and it is retried.")
	fs.DurationVar(&o.QuietPeriod, "quiet-period", o.QuietPeriod, "Wait for this much quiet after a change before re-checking.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
}

// Validate checks the options before anything connects (a pointer receiver, as the
// node agent's: the command binds opts.Validate before the flags are parsed).
func (o *Options) Validate() error {
	switch {
	case o.Namespace != "" && len(o.Namespaces) > 0:
		return errors.New("--namespace and --namespaces are mutually exclusive")
	case o.Dir == "":
		return errors.New("--dir is required")
	}
	return nil
}

// WatchedNamespaces are the namespaces followed, sorted; none means every namespace.
func (o Options) WatchedNamespaces() []string {
	if o.Namespace != "" {
		return []string{o.Namespace}
	}
	ns := slices.DeleteFunc(slices.Clone(o.Namespaces), func(n string) bool { return n == "" })
	return checksum.NewScope(ns, o.VersionAnnotation).Namespaces
}

var (
	consistentGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_consistent",
		Help: "1 while the local objects agree with the control plane's checksum, 0 while they do not; by track (secrets, ingresses)."}, []string{"track"})
	mismatchIDs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_mismatch_ids",
		Help: "IDs that differ from the newest published checksum of the agent's scope, by track and side (local_only, published_only); 0 when that object published no IDs."}, []string{"track", "side"})
	scopeMismatch = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_scope_mismatch",
		Help: "1 while checksums are published but none matches and none covers the agent's own scope (namespaces, version annotation), by track."}, []string{"track"})
	undecodable = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_undecodable_checksums",
		Help: "Checksum objects the agent cannot decode and ignores, by track."}, []string{"track"})
	servedSecrets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_served_secrets",
		Help: "Secrets in the verified set on disk."})
	snapshotCorrupt = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_snapshot_corrupt",
		Help: "1 when the on-disk snapshot failed its integrity check at start (it is not served)."})
	reloadFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "trustplane_dataplane_reload_failures_total",
		Help: "Runs of --reload-command that failed after a newly verified set was written (the previous set was put back)."})
	reloadFailing = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_reload_failing",
		Help: "1 while a newly verified set waits for --reload-command to succeed."})
)

// ownMetrics are registered when the agent starts, in its process only.
var ownMetrics = []prometheus.Collector{consistentGauge, mismatchIDs, scopeMismatch, undecodable, servedSecrets, snapshotCorrupt, reloadFailures, reloadFailing}

// Agent verifies the namespaces it follows.
type Agent struct {
	opts     Options
	scope    string // the scope string of what it follows, as the control plane records it
	perNS    bool   // files are named <namespace>.<name>: it follows more than one namespace
	reader   client.Reader
	store    dataplane.Store
	recorder events.EventRecorder

	mu            sync.Mutex
	served        dataplane.Snapshot         // what is on disk
	haveServed    bool                       // served is a verified set (not nothing)
	reloadFailing bool                       // the last reload after a new set failed
	lastMismatch  map[string]string          // track → the last reported distrust, to report each once
	undecodableOf map[string]map[string]bool // track → UIDs of objects reported undecodable
	debounce      *debounce.Debouncer
	classes       *ingressClasses // what the ingresses track's class rules read
}

// maxCheckDelay is the longest a check waits while changes keep coming.
const maxCheckDelay = 5 * time.Second

// reconcileKey is the one work item: every change re-checks everything.
var reconcileKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "dataplane"}}

// retryBackoff bounds the retries of a failed reconcile (a reload command that fails while
// nginx is down): quick at first, and at most half a minute after nginx is back.
func retryBackoff() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, 30*time.Second)
}

// Run restores the last verified set from disk, then follows the API server until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := manager.RegisterMetrics(ownMetrics...); err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("dataplane")
	namespaces := opts.WatchedNamespaces()
	a := &Agent{opts: opts, scope: dataplane.ScopeOf(namespaces, opts.VersionAnnotation), perNS: len(namespaces) != 1,
		store: dataplane.Store{Dir: opts.Dir}, lastMismatch: map[string]string{}, undecodableOf: map[string]map[string]bool{},
		debounce: debounce.New(opts.QuietPeriod, maxCheckDelay, clock.RealClock{})}
	a.restore(ctx, logger)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Cache:                  cacheOptions(namespaces, opts.VersionAnnotation),
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		// The API server may be away for long: wait for it rather than exit.
		Controller: crconfig.Controller{CacheSyncTimeout: 365 * 24 * time.Hour, SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating the agent: %w", err)
	}
	// Ready as soon as it runs: it serves the restored set from disk, and a gateway must not
	// stay unready while the API server is away.
	if err := manager.AddProbes(mgr, healthz.Ping); err != nil {
		return err
	}
	a.reader, a.recorder = mgr.GetCache(), mgr.GetEventRecorder("trustplane-dataplane")
	logger.Info("following", "scope", a.scope)
	if err := a.setupController(mgr); err != nil {
		return err
	}
	return manager.Run(ctx, mgr)
}

// setupController watches everything the verdicts depend on. Checksum objects are watched
// unstructured: one that the API server stored but the Go type cannot decode (a timestamp
// without a zone, say) would otherwise fail every list and stop the agent for good.
func (a *Agent) setupController(mgr ctrl.Manager) error {
	// Every change re-checks everything, once the changes have been quiet for
	// --quiet-period (a burst of Secret updates → one check, one write, one reload).
	touch := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(reconcileKey, a.debounce.Touch(reconcileKey.Name))
	}
	everything := handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			touch(q)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			touch(q)
		},
		DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			touch(q)
		},
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			touch(q)
		},
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("dataplane").
		WithOptions(controller.Options{RateLimiter: retryBackoff()}).
		Watches(&corev1.Secret{}, everything).
		Watches(checksumObject(kindSecretCheckSum), everything)
	if a.opts.Ingresses {
		b = b.Watches(&networkingv1.Ingress{}, everything).Watches(checksumObject(kindIngressCheckSum), everything)
	}
	c, err := b.Build(a)
	if err != nil {
		return err
	}
	a.classes = newIngressClasses(a.opts.IngressClasses.IgnoreIngressClass, mgr.GetAPIReader(), mgr.GetCache(), c, everything)
	return nil
}

// cacheOptions follow the namespaces (none: all), and keep of each Secret only what a
// verified set can hold: an agent that follows every namespace would otherwise hold every
// service-account token and Helm release of the cluster in memory. (A default transform,
// not a per-type one: that would need the API server's REST mapping before the agent
// starts, and it must start from disk while the API server is away.)
func cacheOptions(namespaces []string, versionAnnotation string) cache.Options {
	opts := cache.Options{DefaultTransform: stripObject(versionAnnotation)}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// stripObject drops managed fields (as controller-runtime's default transform), and of
// Secrets the data of those without a version (never part of the checksum) and every data
// key the checksum does not read.
func stripObject(versionAnnotation string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		delete(s.Annotations, corev1.LastAppliedConfigAnnotation) // kubectl apply copies the data there
		if _, versioned := s.Annotations[versionAnnotation]; !versioned {
			s.Data = nil
			return s, nil
		}
		for k := range s.Data {
			switch k {
			case checksum.KeyTLSCrt, checksum.KeyTLSKey, checksum.KeyCACrt, checksum.KeyCACRL:
			default:
				delete(s.Data, k)
			}
		}
		return s, nil
	}
}

// restore serves the on-disk snapshot before anything else: the gateway keeps working
// when the agent restarts while the API server is away. A corrupt snapshot is never served.
func (a *Agent) restore(ctx context.Context, logger interface {
	Info(string, ...any)
	Error(error, string, ...any)
}) {
	snap, err := a.store.Restore()
	switch {
	case err == nil:
		a.served, a.haveServed = snap, true
		servedSecrets.Set(float64(len(snap.Secrets)))
		logger.Info("restored the last verified set from disk", "checksum", snap.Checksum, "secrets", len(snap.Secrets))
		// The files are the ones nginx already serves or reads when it starts (a sidecar
		// starts before its gateway): a failed reload here changes nothing.
		if out, err := a.reload(ctx); err != nil {
			logger.Info("reload command failed after the restore; nginx reads the restored files when it starts", "error", err.Error(), "output", out)
		}
	case errors.Is(err, os.ErrNotExist):
		logger.Info("no verified set on disk yet")
	case errors.Is(err, dataplane.ErrCorruptSnapshot):
		snapshotCorrupt.Set(1)
		logger.Error(err, "the on-disk snapshot is corrupt and is not served; waiting for a verified set from the API server")
	default:
		logger.Error(err, "restoring the verified set")
	}
}

// Reconcile re-checks everything followed: the local secrets (and ingresses) against the
// published checksums.
func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if wait := a.debounce.Wait(reconcileKey.Name); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var ingressErr error
	if a.opts.Ingresses {
		ingressErr = a.verifyIngresses(ctx) // never holds the secrets back
	}
	return reconcile.Result{}, errors.Join(ingressErr, a.verifySecrets(ctx))
}

// verifySecrets writes the secrets to disk when they are trusted, and otherwise keeps
// the last verified set and reports the difference.
func (a *Agent) verifySecrets(ctx context.Context) error {
	logger := log.FromContext(ctx)
	secrets := &corev1.SecretList{}
	if err := a.reader.List(ctx, secrets); err != nil {
		return fmt.Errorf("listing Secrets: %w", err)
	}
	local := a.localSet(secrets.Items)
	ids := make([]string, len(local))
	for i, s := range local {
		ids[i] = s.ID
	}
	published, byName, err := a.published(ctx, trackSecrets)
	if err != nil {
		return err
	}
	v := dataplane.Decide(a.scope, ids, published, a.opts.FailOpen)
	against := byName[v.Against]
	if !a.report(logger, trackSecrets, v, against) {
		return nil
	}
	return a.serve(ctx, dataplane.Snapshot{Checksum: v.Checksum, Secrets: local}, v.Reason, against)
}

// serve writes a verified set and reloads the gateway. When the reload fails the gateway
// does not serve the new set: the previous files go back, so that a gateway started
// later reads a set that was served, and the error makes the work queue retry.
func (a *Agent) serve(ctx context.Context, snap dataplane.Snapshot, reason string, against client.Object) error {
	logger := log.FromContext(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.haveServed && a.served.Checksum == snap.Checksum && sameSecrets(a.served.Secrets, snap.Secrets) {
		// Back to what is served (a rotation undone): no new set waits for a reload.
		a.reloadFailing = false
		reloadFailing.Set(0)
		return nil
	}
	if err := a.store.Write(snap); err != nil {
		return fmt.Errorf("writing the verified set: %w", err)
	}
	if out, err := a.reload(ctx); err != nil {
		return a.rollBack(ctx, fmt.Errorf("reload command failed: %w; output: %s", err, out), snap.Checksum, against)
	}
	if a.reloadFailing {
		logger.Info("the reload command succeeded again")
	}
	a.reloadFailing = false
	reloadFailing.Set(0)
	a.served, a.haveServed = snap, true
	servedSecrets.Set(float64(len(snap.Secrets)))
	snapshotCorrupt.Set(0)
	logger.Info("serving a newly verified set", "checksum", snap.Checksum, "secrets", len(snap.Secrets), "reason", reason)
	if against != nil {
		a.recorder.Eventf(against, nil, corev1.EventTypeNormal, "Verified", "Verify", "data plane serves %d secrets matching checksum %s", len(snap.Secrets), snap.Checksum)
	}
	return nil
}

// rollBack puts the previously served set back on disk (or, when none was served, leaves
// no set at all) after a failed reload, reports the failure once per failing period, and
// returns the error for the work queue to retry with backoff.
// The caller holds a.mu.
func (a *Agent) rollBack(ctx context.Context, reloadErr error, sum string, against client.Object) error {
	restore := a.store.Clear
	if a.haveServed {
		restore = func() error { return a.store.Write(a.served) }
	}
	restoreErr := restore()
	// Counted once the files are back: whoever watches the metric then sees the old set.
	reloadFailures.Inc()
	reloadFailing.Set(1)
	if !a.reloadFailing { // each retry's error is logged by controller-runtime
		log.FromContext(ctx).Info("reload failed: kept the previous verified set; retrying with backoff", "checksum", sum, "error", reloadErr.Error())
		if against != nil {
			a.recorder.Eventf(against, nil, corev1.EventTypeWarning, "ReloadFailed", "Reload",
				"data plane kept the previous verified set; the new one (checksum %s) waits for the reload to succeed: %s", sum, truncate(reloadErr.Error(), 600))
		}
	}
	a.reloadFailing = true
	if restoreErr != nil {
		return fmt.Errorf("%w; putting the previous verified set back: %w", reloadErr, restoreErr)
	}
	return reloadErr
}

// verifyIngresses checks the Ingresses a Tengine-Ingress with the agent's class flags
// keeps against the IngressCheckSums.
func (a *Agent) verifyIngresses(ctx context.Context) error {
	classes, readable, err := a.classes.lookup(ctx)
	if !readable || err != nil {
		return err
	}
	ingresses := &networkingv1.IngressList{}
	if err := a.reader.List(ctx, ingresses); err != nil {
		return fmt.Errorf("listing Ingresses: %w", err)
	}
	var ids []string
	for _, ing := range ingresses.Items {
		id, err := a.opts.IngressClasses.IngressIDOfClass(ing.Name, ing.Annotations, ing.Spec.IngressClassName, a.opts.VersionAnnotation, classes)
		if err == nil {
			ids = append(ids, id)
		}
	}
	published, byName, err := a.published(ctx, trackIngresses)
	if err != nil {
		return err
	}
	v := dataplane.Decide(a.scope, ids, published, a.opts.FailOpen)
	a.report(log.FromContext(ctx), trackIngresses, v, byName[v.Against])
	return nil
}

const (
	trackSecrets   = "secrets"
	trackIngresses = "ingresses"

	kindSecretCheckSum  = "SecretCheckSum"
	kindIngressCheckSum = "IngressCheckSum"
)

// checksumKinds are the published kinds, by track.
var checksumKinds = map[string]string{trackSecrets: kindSecretCheckSum, trackIngresses: kindIngressCheckSum}

// checksumObject is an empty unstructured object of a checksum kind, for watches and lists.
func checksumObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tenginev1.GroupVersion.WithKind(kind))
	return u
}

// published reads a track's checksum objects into the library's view, indexed by
// namespace/name so that events can go to the one a verdict names. Objects that do not
// decode are skipped and reported.
func (a *Agent) published(ctx context.Context, track string) ([]dataplane.Published, map[string]client.Object, error) {
	kind := checksumKinds[track]
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tenginev1.GroupVersion.WithKind(kind + "List"))
	if err := a.reader.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing %ss: %w", kind, err)
	}
	var published []dataplane.Published
	byName := make(map[string]client.Object, len(list.Items))
	bad := map[string]bool{}
	for i := range list.Items {
		u := &list.Items[i]
		sum, ids, err := decodeSpec(kind, u)
		if err != nil {
			bad[string(u.GetUID())] = true
			a.reportUndecodable(ctx, track, u, err)
			continue
		}
		name := u.GetNamespace() + "/" + u.GetName()
		_, omitted := u.GetAnnotations()[dataplane.IDsOmittedAnnotation]
		published = append(published, dataplane.Published{Name: name, Checksum: sum, IDs: ids, Created: u.GetCreationTimestamp().Time,
			Scope: u.GetAnnotations()[dataplane.ScopeAnnotation], IDsOmitted: omitted})
		byName[name] = u
	}
	a.mu.Lock()
	a.undecodableOf[track] = bad // forget objects that are gone: a new one is reported anew
	a.mu.Unlock()
	undecodable.WithLabelValues(track).Set(float64(len(bad)))
	return published, byName, nil
}

// decodeSpec converts an object into its Go type, as any data plane decodes it.
func decodeSpec(kind string, u *unstructured.Unstructured) (sum string, ids []string, err error) {
	if kind == kindSecretCheckSum {
		var o tenginev1.SecretCheckSum
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &o)
		return o.Spec.Checksum, o.Spec.IDs, err
	}
	var o tenginev1.IngressCheckSum
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &o)
	return o.Spec.Checksum, o.Spec.IDs, err
}

// reportUndecodable logs and records a Warning event on an object that does not decode,
// once per object.
func (a *Agent) reportUndecodable(ctx context.Context, track string, u *unstructured.Unstructured, err error) {
	a.mu.Lock()
	seen := a.undecodableOf[track][string(u.GetUID())]
	a.mu.Unlock()
	if seen {
		return
	}
	log.FromContext(ctx).Info("ignoring a checksum object that does not decode", "track", track,
		"object", u.GetNamespace()+"/"+u.GetName(), "error", truncate(err.Error(), 300))
	a.recorder.Eventf(u, nil, corev1.EventTypeWarning, "UndecodableChecksum", "Verify",
		"data plane ignores this %s: it does not decode: %s", u.GetKind(), truncate(err.Error(), 600))
}

// localSet is every Secret with a valid ID, as the control plane computes it, with the
// files Tengine-Ingress would load from it.
func (a *Agent) localSet(items []corev1.Secret) []dataplane.Secret {
	var out []dataplane.Secret
	for _, s := range items {
		id, err := checksum.SecretID(s.Name, s.Annotations, a.opts.VersionAnnotation, s.Data)
		if err != nil {
			continue // left out on both sides alike; the control plane reports it
		}
		sec := dataplane.Secret{Name: s.Name, ID: id, CA: s.Data[checksum.KeyCACrt], CRL: s.Data[checksum.KeyCACRL]}
		if a.perNS {
			sec.Namespace = s.Namespace
		}
		// A Secret counts as a pair when both are there; otherwise it counted as CA-only.
		if crt, key := s.Data[checksum.KeyTLSCrt], s.Data[checksum.KeyTLSKey]; crt != nil && key != nil {
			sec.Crt, sec.Key = crt, key
		}
		out = append(out, sec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Base() < out[j].Base() })
	return out
}

// report records a verdict in metrics, and a distrust in logs and one event per
// distinct difference (IDs, never contents). It returns whether the track is trusted.
func (a *Agent) report(logger interface {
	Info(string, ...any)
}, track string, v dataplane.Verdict, against client.Object) bool {
	localOnly, publishedOnly := mismatchIDs.WithLabelValues(track, "local_only"), mismatchIDs.WithLabelValues(track, "published_only")
	localOnly.Set(float64(len(v.LocalOnly)))
	publishedOnly.Set(float64(len(v.PublishedOnly)))
	consistentGauge.WithLabelValues(track).Set(boolGauge(v.Trusted))
	scopeMismatch.WithLabelValues(track).Set(boolGauge(v.Reason == dataplane.ScopeMismatch))
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Trusted {
		a.lastMismatch[track] = ""
		return true
	}
	key, reason, note := a.describe(track, v, against)
	if key == a.lastMismatch[track] {
		return false
	}
	a.lastMismatch[track] = key
	logger.Info("objects do not agree with the control plane; keeping the last verified state",
		"track", track, "reason", v.Reason, "localChecksum", v.Checksum, "against", v.Against, "againstScope", v.AgainstScope,
		"scope", a.scope, "idsOmitted", v.IDsOmitted, "localOnly", v.LocalOnly, "publishedOnly", v.PublishedOnly)
	if against != nil {
		a.recorder.Eventf(against, nil, corev1.EventTypeWarning, reason, "Verify", "%s", truncate(note, 1000))
	}
	return false
}

// describe words a distrust: the key it is reported once by, the event reason and note.
// A scope mismatch is keyed by the two scopes alone, not by the object: each new
// publication of the other scope is the same news.
func (a *Agent) describe(track string, v dataplane.Verdict, against client.Object) (key, reason, note string) {
	switch {
	case v.Reason == dataplane.ScopeMismatch:
		note = fmt.Sprintf("%s: no published checksum matches and none covers this data plane's scope (%s); the newest, %s, covers %s. "+
			"Publish a checksum for this scope (a one-namespace data plane needs trustplane manager --secret-checksum-scopes=cluster,namespace) "+
			"or follow the namespaces the control plane covers", track, a.scope, v.Against, v.AgainstScope)
		return "scope " + v.AgainstScope, dataplane.ScopeMismatch, note
	case v.IDsOmitted:
		var why string
		if against != nil {
			why = against.GetAnnotations()[dataplane.IDsOmittedAnnotation]
		}
		note = fmt.Sprintf("%s %s: local checksum %s; %s did not publish its IDs (%s), so the differing IDs are unknown",
			track, v.Reason, v.Checksum, v.Against, why)
	default:
		note = fmt.Sprintf("%s %s: local checksum %s; only local: [%s]; only in %s: [%s]",
			track, v.Reason, v.Checksum, strings.Join(v.LocalOnly, ", "), v.Against, strings.Join(v.PublishedOnly, ", "))
	}
	return note, "ChecksumMismatch", note
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// reload runs the reload command, if any, and returns its output (truncated: a command's
// complaints, never key material, which the agent never passes to it).
func (a *Agent) reload(ctx context.Context) (string, error) {
	if a.opts.ReloadCommand == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := strings.Fields(a.opts.ReloadCommand)
	// The operator's own --reload-command, split on spaces and run without a shell.
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput() //nolint:gosec // see above
	return truncate(strings.TrimSpace(string(out)), 500), err
}

// sameSecrets says whether two sets would write the same files. The ID covers only the
// leaf certificate, so the chain behind it, the key and the CA files are compared too.
func sameSecrets(a, b []dataplane.Secret) bool {
	return slices.EqualFunc(a, b, func(x, y dataplane.Secret) bool {
		return x.Namespace == y.Namespace && x.Name == y.Name && x.ID == y.ID && bytes.Equal(x.Crt, y.Crt) &&
			bytes.Equal(x.Key, y.Key) && bytes.Equal(x.CA, y.CA) && bytes.Equal(x.CRL, y.CRL)
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
