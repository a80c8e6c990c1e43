// Package tlsexpiry brings the pod-certificate warnings to kubernetes.io/tls Secrets:
// CertificateOverdueForRefresh once a Secret's certificate is past its refresh point (two
// thirds of its life, where cert-manager renews, plus ten minutes) and CertificateExpired
// once it is past notAfter — each once per certificate — with a requeue at the next
// threshold instead of polling.
package tlsexpiry

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
)

// overdueAfter mirrors the pod-certificate rule: a refresh is overdue this long after
// the point it should have happened.
const overdueAfter = 10 * time.Minute

// Reconciler watches one Secret's certificate.
type Reconciler struct {
	// Reader reads Secrets: the controller's own cache, which holds them as strip left
	// them, or any reader of whole Secrets (their certificate is then derived on read).
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// MaxCertificateBytes is --tls-expiry-secret-max-certificate-bytes.
	MaxCertificateBytes int

	mu    sync.Mutex
	certs map[types.NamespacedName]*tracked
}

// tracked is what is known of a Secret's current certificate.
type tracked struct {
	fingerprint                    string
	refreshAt, notAfter            time.Time
	state                          string
	emittedOverdue, emittedExpired bool
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup adds the controller, with its own cache of kubernetes.io/tls Secrets (selected by
// the API server: no other type ever reaches the process) that keeps of each only what
// its certificate says (see strip).
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		// Lists that are not streamed come in stripped pages too (see manager.StripListPages).
		NewInformer: manager.StripListPages(Transform(opts.MaxCertificateBytes), manager.ListPageBytes),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Field:     fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)),
			Transform: Transform(opts.MaxCertificateBytes),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the TLS Secret cache: %w", err)
	}
	if err := manager.AddCache(mgr, secrets); err != nil {
		return nil, fmt.Errorf("adding the TLS Secret cache: %w", err)
	}
	r := &Reconciler{Reader: secrets, Recorder: mgr.GetEventRecorder("trustplane-" + Name), Clock: opts.Clock,
		MaxCertificateBytes: opts.MaxCertificateBytes, certs: map[types.NamespacedName]*tracked{}}
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		WatchesRawSource(source.Kind(secrets, client.Object(&corev1.Secret{}), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile checks one Secret and comes back at its next threshold.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	secret := &corev1.Secret{}
	if err := r.Reader.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading Secret %s: %w", req.Name, err)
	}
	cert := certificateOf(secret, r.MaxCertificateBytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.certs[req.NamespacedName]
	if t == nil || t.fingerprint != cert.SHA256 {
		switch cert.Problem {
		case problemTooLarge:
			// A new oversized certificate: said once, on the Secret (its owner can act),
			// never parsed.
			r.setState(req.NamespacedName, t, &tracked{fingerprint: cert.SHA256, state: stateTooLarge})
			notAfterGauge.DeleteLabelValues(req.Namespace, req.Name)
			r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonTooLarge, "Check",
				"tls.crt is %d bytes, above --tls-expiry-secret-max-certificate-bytes=%d: its expiry is not watched", cert.Bytes, r.MaxCertificateBytes)
			return reconcile.Result{}, nil
		case problemInvalid:
			r.setState(req.NamespacedName, t, &tracked{fingerprint: cert.SHA256, state: stateInvalid})
			notAfterGauge.DeleteLabelValues(req.Namespace, req.Name)
			return reconcile.Result{}, nil // the JWKS and checksum systems report bad certificates
		}
		lifetime := cert.NotAfter.Sub(cert.NotBefore)
		next := &tracked{fingerprint: cert.SHA256, notAfter: cert.NotAfter, refreshAt: cert.NotBefore.Add(lifetime * 2 / 3)}
		r.setState(req.NamespacedName, t, next) // a new certificate: both warnings may come again
		t = next
		notAfterGauge.WithLabelValues(req.Namespace, req.Name).Set(float64(cert.NotAfter.Unix()))
	}
	if t.state == stateInvalid || t.state == stateTooLarge {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	if now.After(t.refreshAt.Add(overdueAfter)) && !t.emittedOverdue {
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonOverdueForRefresh, "Check",
			"TLS certificate refresh overdue: it should have been renewed by %s and expires at %s", t.refreshAt.UTC().Format(time.RFC3339), t.notAfter.UTC().Format(time.RFC3339))
		t.emittedOverdue = true
	}
	if now.After(t.notAfter) && !t.emittedExpired {
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonExpired, "Check", "TLS certificate expired at %s", t.notAfter.UTC().Format(time.RFC3339))
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
			return nil, errors.New("no certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}
