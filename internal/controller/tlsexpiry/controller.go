// Package tlsexpiry brings the pod-certificate warnings to kubernetes.io/tls Secrets:
// CertificateOverdueForRefresh once a Secret's certificate is past its refresh point (two
// thirds of its life, where cert-manager renews, plus ten minutes) and CertificateExpired
// once it is past notAfter — each once per certificate — with a requeue at the next
// threshold instead of polling.
package tlsexpiry

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
)

// Name is the controller's name in --controllers.
const Name = "tls-expiry"

// overdueAfter mirrors the pod-certificate rule: a refresh is overdue this long after
// the point it should have happened.
const overdueAfter = 10 * time.Minute

var (
	notAfterGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_tls_secret_not_after_seconds",
		Help: "Expiry (Unix time) of each kubernetes.io/tls Secret's leaf certificate."}, []string{"namespace", "name"})
	stateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_tls_secret_states",
		Help: "kubernetes.io/tls Secrets by state (fresh, overdue_for_refresh, expired, invalid)."}, []string{"state"})
)

func init() { metrics.Registry.MustRegister(notAfterGauge, stateGauge) }

// Controller is the registry entry for `trustplane manager`.
func Controller() manager.Controller {
	return manager.Controller{
		Name: Name, Help: "Warning events and metrics when kubernetes.io/tls Secrets are overdue for renewal or expired",
		Setup: func(mgr ctrl.Manager) error { _, err := Setup(mgr, clock.RealClock{}); return err },
	}
}

// Reconciler watches one Secret's certificate.
type Reconciler struct {
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock

	mu    sync.Mutex
	certs map[types.NamespacedName]*tracked
}

// tracked is what is known of a Secret's current certificate.
type tracked struct {
	fingerprint                    [32]byte
	refreshAt, notAfter            time.Time
	state                          string
	emittedOverdue, emittedExpired bool
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the controller, with a cache of TLS Secrets stripped to their certificate.
func Setup(mgr ctrl.Manager, c clock.PassiveClock) (*Reconciler, error) {
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Field:     fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)),
			Transform: keepCertificate,
		}},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, err
	}
	r := &Reconciler{Reader: secrets, Recorder: mgr.GetEventRecorder("trustplane-" + Name), Clock: c, certs: map[types.NamespacedName]*tracked{}}
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		WatchesRawSource(source.Kind(secrets, client.Object(&corev1.Secret{}), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func keepCertificate(obj any) (any, error) {
	if s, ok := obj.(*corev1.Secret); ok {
		s.Data = map[string][]byte{corev1.TLSCertKey: s.Data[corev1.TLSCertKey]}
		s.ManagedFields = nil
	}
	return obj, nil
}

// Reconcile checks one Secret and comes back at its next threshold.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	secret := &corev1.Secret{}
	if err := r.Reader.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	crt := secret.Data[corev1.TLSCertKey]
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.certs[req.NamespacedName]
	if fp := sha256.Sum256(crt); t == nil || t.fingerprint != fp {
		leaf, err := leafOf(crt)
		if err != nil {
			r.setState(req.NamespacedName, t, &tracked{fingerprint: fp, state: "invalid"})
			notAfterGauge.DeleteLabelValues(req.Namespace, req.Name)
			return reconcile.Result{}, nil // the JWKS and checksum systems report bad certificates
		}
		lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
		next := &tracked{fingerprint: fp, notAfter: leaf.NotAfter, refreshAt: leaf.NotBefore.Add(lifetime * 2 / 3)}
		r.setState(req.NamespacedName, t, next) // a new certificate: both warnings may come again
		t = next
		notAfterGauge.WithLabelValues(req.Namespace, req.Name).Set(float64(leaf.NotAfter.Unix()))
	}
	if t.state == "invalid" {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	if now.After(t.refreshAt.Add(overdueAfter)) && !t.emittedOverdue {
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, podcert.ReasonOverdueForRefresh, "Check",
			"TLS certificate refresh overdue: it should have been renewed by %s and expires at %s", t.refreshAt.UTC().Format(time.RFC3339), t.notAfter.UTC().Format(time.RFC3339))
		t.emittedOverdue = true
	}
	if now.After(t.notAfter) && !t.emittedExpired {
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, podcert.ReasonExpired, "Check", "TLS certificate expired at %s", t.notAfter.UTC().Format(time.RFC3339))
		t.emittedExpired = true
	}
	state, next := podcert.StateFresh, t.refreshAt.Add(overdueAfter)
	switch {
	case now.After(t.notAfter):
		state, next = podcert.StateExpired, time.Time{}
	case now.After(t.refreshAt.Add(overdueAfter)):
		state, next = podcert.StateOverdueForRefresh, t.notAfter
	}
	r.setState(req.NamespacedName, t, &tracked{fingerprint: t.fingerprint, refreshAt: t.refreshAt, notAfter: t.notAfter, state: state,
		emittedOverdue: t.emittedOverdue, emittedExpired: t.emittedExpired})
	if next.IsZero() {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: next.Sub(now) + time.Second}, nil
}

// setState replaces a Secret's record and moves it between state counts.
func (r *Reconciler) setState(key types.NamespacedName, old, next *tracked) {
	if old != nil && old.state != "" {
		stateGauge.WithLabelValues(old.state).Dec()
	}
	if next.state != "" {
		stateGauge.WithLabelValues(next.state).Inc()
	}
	r.certs[key] = next
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.certs[key]; t != nil && t.state != "" {
		stateGauge.WithLabelValues(t.state).Dec()
	}
	delete(r.certs, key)
	notAfterGauge.DeleteLabelValues(key.Namespace, key.Name)
}

func leafOf(crt []byte) (*x509.Certificate, error) {
	for rest := crt; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, fmt.Errorf("no certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}
