// Package dataplaneagent is `trustplane dataplane`: a gateway-side agent that writes the
// TLS Secrets of one namespace to a directory (for nginx/Tengine) only while they agree
// with the control plane's SecretCheckSum, and otherwise keeps serving the last verified
// set — also across API server outages and restarts during one.
package dataplaneagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// Options are the agent's flags.
type Options struct {
	Namespace              string
	Dir                    string
	VersionAnnotation      string
	FailOpen               bool
	Ingresses              bool
	ReloadCommand          string
	QuietPeriod            time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
}

// DefaultOptions are the flag defaults; Tengine-Ingress is fail-open.
func DefaultOptions() Options {
	return Options{VersionAnnotation: checksum.DefaultVersionAnnotation, FailOpen: true, Ingresses: true, QuietPeriod: 200 * time.Millisecond,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081"}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace whose TLS Secrets and SecretCheckSums to follow (required).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Directory for the verified <name>.crt/<name>.key files and the snapshot (required).")
	fs.StringVar(&o.VersionAnnotation, "version-annotation", o.VersionAnnotation, "Annotation holding a Secret's version.")
	fs.BoolVar(&o.FailOpen, "fail-open", o.FailOpen, "Trust the secrets when no SecretCheckSum exists (Tengine-Ingress's behaviour); false keeps the last verified set.")
	fs.BoolVar(&o.Ingresses, "ingresses", o.Ingresses, "Also verify the namespace's Ingresses against its IngressCheckSum (reported in metrics and events).")
	fs.StringVar(&o.ReloadCommand, "reload-command", o.ReloadCommand, "Command run after the verified files change, e.g. 'nginx -s reload' (split on spaces, no shell).")
	fs.DurationVar(&o.QuietPeriod, "quiet-period", o.QuietPeriod, "Wait for this much quiet after a change before re-checking.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
}

// Validate checks the options before anything connects (a pointer receiver, as the
// node agent's: the command binds opts.Validate before the flags are parsed).
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("--namespace is required")
	case o.Dir == "":
		return errors.New("--dir is required")
	}
	return nil
}

var (
	consistentGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_consistent",
		Help: "1 while the local objects agree with the control plane's checksum, 0 while they do not; by track (secrets, ingresses)."}, []string{"track"})
	mismatchIDs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_mismatch_ids",
		Help: "IDs that differ from the newest published checksum, by track and side (local_only, published_only)."}, []string{"track", "side"})
	servedSecrets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_served_secrets",
		Help: "Secrets in the verified set on disk."})
	snapshotCorrupt = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_snapshot_corrupt",
		Help: "1 when the on-disk snapshot failed its integrity check at start (it is not served)."})
)

func init() {
	metrics.Registry.MustRegister(consistentGauge, mismatchIDs, servedSecrets, snapshotCorrupt)
}

// Agent verifies one namespace.
type Agent struct {
	opts     Options
	reader   client.Reader
	store    dataplane.Store
	recorder events.EventRecorder

	mu           sync.Mutex
	served       dataplane.Snapshot // what is on disk
	lastMismatch map[string]string  // track → the last reported diff, to report each once
}

// Run restores the last verified set from disk, then follows the API server until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("dataplane")
	a := &Agent{opts: opts, store: dataplane.Store{Dir: opts.Dir}, lastMismatch: map[string]string{}}
	a.restore(logger)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}},
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
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: opts.Namespace, Name: opts.Namespace}}
	everything := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("dataplane").
		Watches(&corev1.Secret{}, everything).
		Watches(&tenginev1.SecretCheckSum{}, everything)
	if opts.Ingresses {
		b = b.Watches(&networkingv1.Ingress{}, everything).Watches(&tenginev1.IngressCheckSum{}, everything)
	}
	err = b.Complete(a)
	if err != nil {
		return err
	}
	return manager.Run(ctx, mgr)
}

// restore serves the on-disk snapshot before anything else: the gateway keeps working
// when the agent restarts while the API server is away. A corrupt snapshot is never served.
func (a *Agent) restore(logger interface {
	Info(string, ...any)
	Error(error, string, ...any)
}) {
	snap, err := a.store.Restore()
	switch {
	case err == nil:
		a.served = snap
		servedSecrets.Set(float64(len(snap.Secrets)))
		logger.Info("restored the last verified set from disk", "checksum", snap.Checksum, "secrets", len(snap.Secrets))
		a.reload(logger)
	case errors.Is(err, os.ErrNotExist):
		logger.Info("no verified set on disk yet")
	case errors.Is(err, dataplane.ErrCorruptSnapshot):
		snapshotCorrupt.Set(1)
		logger.Error(err, "the on-disk snapshot is corrupt and is not served; waiting for a verified set from the API server")
	default:
		logger.Error(err, "restoring the verified set")
	}
}

// Reconcile re-checks the namespace: the local secrets (and ingresses) against the
// published checksums.
func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if a.opts.Ingresses {
		if err := a.verifyIngresses(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, a.verifySecrets(ctx)
}

// verifySecrets writes the secrets to disk when they are trusted, and otherwise keeps
// the last verified set and reports the difference.
func (a *Agent) verifySecrets(ctx context.Context) error {
	logger := log.FromContext(ctx)
	secrets := &corev1.SecretList{}
	if err := a.reader.List(ctx, secrets, client.InNamespace(a.opts.Namespace)); err != nil {
		return err
	}
	local := a.localSet(secrets.Items)
	ids := make([]string, len(local))
	for i, s := range local {
		ids[i] = s.ID
	}
	sums := &tenginev1.SecretCheckSumList{}
	if err := a.reader.List(ctx, sums, client.InNamespace(a.opts.Namespace)); err != nil {
		return err
	}
	published, byName := publishedOf(sums.Items, func(s *tenginev1.SecretCheckSum) (string, []string) { return s.Spec.Checksum, s.Spec.IDs })
	v := dataplane.Decide(ids, published, a.opts.FailOpen)
	if !a.report(logger, trackSecrets, v, byName[v.Against]) {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.served.Checksum == v.Checksum && sameSecrets(a.served.Secrets, local) {
		return nil
	}
	snap := dataplane.Snapshot{Checksum: v.Checksum, Secrets: local}
	if err := a.store.Write(snap); err != nil {
		return fmt.Errorf("writing the verified set: %w", err)
	}
	a.served = snap
	servedSecrets.Set(float64(len(local)))
	snapshotCorrupt.Set(0)
	logger.Info("serving a newly verified set", "checksum", v.Checksum, "secrets", len(local), "reason", v.Reason)
	if cr := byName[v.Against]; cr != nil {
		a.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Verified", "Verify", "data plane serves %d secrets matching checksum %s", len(local), v.Checksum)
	}
	a.reload(logger)
	return nil
}

// verifyIngresses checks the namespace's Ingresses against its IngressCheckSums.
func (a *Agent) verifyIngresses(ctx context.Context) error {
	ingresses := &networkingv1.IngressList{}
	if err := a.reader.List(ctx, ingresses, client.InNamespace(a.opts.Namespace)); err != nil {
		return err
	}
	var ids []string
	for _, ing := range ingresses.Items {
		if id, err := checksum.IngressID(ing.Name, ing.Annotations, a.opts.VersionAnnotation); err == nil {
			ids = append(ids, id)
		}
	}
	sums := &tenginev1.IngressCheckSumList{}
	if err := a.reader.List(ctx, sums, client.InNamespace(a.opts.Namespace)); err != nil {
		return err
	}
	published, byName := publishedOf(sums.Items, func(s *tenginev1.IngressCheckSum) (string, []string) { return s.Spec.Checksum, s.Spec.IDs })
	v := dataplane.Decide(ids, published, a.opts.FailOpen)
	a.report(log.FromContext(ctx), trackIngresses, v, byName[v.Against])
	return nil
}

// publishedOf turns checksum objects into the library's view, and indexes them by name
// so that events can be attached to the one a verdict names.
func publishedOf[T any, P interface {
	*T
	client.Object
}](items []T, spec func(P) (checksum string, ids []string)) ([]dataplane.Published, map[string]client.Object) {
	published := make([]dataplane.Published, len(items))
	byName := make(map[string]client.Object, len(items))
	for i := range items {
		obj := P(&items[i])
		sum, ids := spec(obj)
		published[i] = dataplane.Published{Name: obj.GetName(), Checksum: sum, IDs: ids, Created: obj.GetCreationTimestamp().Time}
		byName[obj.GetName()] = obj
	}
	return published, byName
}

const (
	trackSecrets   = "secrets"
	trackIngresses = "ingresses"
)

// localSet is every Secret with a valid ID, as the control plane computes it.
func (a *Agent) localSet(items []corev1.Secret) []dataplane.Secret {
	var out []dataplane.Secret
	for _, s := range items {
		crt, ok := s.Data[corev1.TLSCertKey]
		if !ok {
			continue
		}
		id, err := checksum.SecretID(s.Name, s.Annotations, a.opts.VersionAnnotation, crt)
		if err != nil {
			continue // left out on both sides alike; the control plane reports it
		}
		out = append(out, dataplane.Secret{Name: s.Name, ID: id, Crt: crt, Key: s.Data[corev1.TLSPrivateKeyKey]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// report records a verdict in metrics, and a distrust in logs and one event per
// distinct difference (IDs, never contents). It returns whether the track is trusted.
func (a *Agent) report(logger interface {
	Info(string, ...any)
}, track string, v dataplane.Verdict, against client.Object) bool {
	localOnly, publishedOnly := mismatchIDs.WithLabelValues(track, "local_only"), mismatchIDs.WithLabelValues(track, "published_only")
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Trusted {
		consistentGauge.WithLabelValues(track).Set(1)
		localOnly.Set(0)
		publishedOnly.Set(0)
		a.lastMismatch[track] = ""
		return true
	}
	consistentGauge.WithLabelValues(track).Set(0)
	localOnly.Set(float64(len(v.LocalOnly)))
	publishedOnly.Set(float64(len(v.PublishedOnly)))
	summary := fmt.Sprintf("%s %s: local checksum %s; only local: [%s]; only in %s: [%s]",
		track, v.Reason, v.Checksum, strings.Join(v.LocalOnly, ", "), v.Against, strings.Join(v.PublishedOnly, ", "))
	if summary == a.lastMismatch[track] {
		return false
	}
	a.lastMismatch[track] = summary
	logger.Info("objects do not agree with the control plane; keeping the last verified state",
		"track", track, "reason", v.Reason, "localChecksum", v.Checksum, "against", v.Against,
		"localOnly", v.LocalOnly, "publishedOnly", v.PublishedOnly)
	if against != nil {
		a.recorder.Eventf(against, nil, corev1.EventTypeWarning, "ChecksumMismatch", "Verify", "%s", truncate(summary, 1000))
	}
	return false
}

func (a *Agent) reload(logger interface{ Error(error, string, ...any) }) {
	if a.opts.ReloadCommand == "" {
		return
	}
	args := strings.Fields(a.opts.ReloadCommand)
	// The operator's own --reload-command, split on spaces and run without a shell.
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil { //nolint:gosec // see above
		logger.Error(err, "reload command failed", "output", truncate(string(out), 500))
	}
}

// sameSecrets says whether two sets would write the same files. The ID covers only the
// leaf certificate, so the chain behind it and the key are compared too.
func sameSecrets(a, b []dataplane.Secret) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].ID != b[i].ID || !bytes.Equal(a[i].Crt, b[i].Crt) || !bytes.Equal(a[i].Key, b[i].Key) {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
