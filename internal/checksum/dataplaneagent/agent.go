// Package dataplaneagent is `trustplane dataplane`: a gateway-side agent that writes the
// TLS and CA Secrets of the namespaces it watches (all of them by default, as
// Tengine-Ingress) to a directory for nginx/Tengine only while they agree with the control
// plane's SecretCheckSum, and otherwise keeps serving the last verified set — also across
// API server outages, restarts during one, and a reload command that fails.
//
// options.go holds its flags; agent.go the Agent and what it watches; verify.go the
// comparison of the local objects with the published checksums; write.go the verified set
// on disk and the reload; report.go and metrics.go what it tells (events, logs, metrics).
package dataplaneagent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/debounce"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// Agent verifies the namespaces it follows.
type Agent struct {
	opts     Options
	scope    string // the scope string of what it follows, as the control plane records it
	perNS    bool   // files are named <namespace>.<name>: it follows more than one namespace
	reader   client.Reader
	store    dataplane.Store
	recorder events.EventRecorder

	mu            sync.Mutex
	served        dataplane.Snapshot                 // what is on disk
	haveServed    bool                               // served is a verified set (not nothing)
	reloadFailing bool                               // the last reload after a new set failed
	lastMismatch  map[checksum.Track]string          // track → the last reported distrust, to report each once
	undecodableOf map[checksum.Track]map[string]bool // track → UIDs of objects reported undecodable
	debounce      *debounce.Debouncer
	classes       *ingressClasses // what the ingresses track's class rules read
	keptBefore    map[string]bool // file bases of unversioned Secrets kept by the last check, reported already
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
		store: dataplane.Store{Dir: opts.Dir}, lastMismatch: map[checksum.Track]string{}, undecodableOf: map[checksum.Track]map[string]bool{},
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
		Watches(checksumObject(checksum.KindSecretCheckSum), everything)
	if a.opts.Ingresses {
		b = b.Watches(&networkingv1.Ingress{}, everything).Watches(checksumObject(checksum.KindIngressCheckSum), everything)
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
			if !slices.Contains(checksum.SecretKeys[:], k) {
				delete(s.Data, k)
			}
		}
		return s, nil
	}
}
