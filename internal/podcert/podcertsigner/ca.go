package podcertsigner

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	certificatesv1ac "k8s.io/client-go/applyconfigurations/certificates/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
)

// FieldOwner is the server-side apply field manager of the ClusterTrustBundle.
const FieldOwner = "trustplane-podcertificate-signer"

// BundleName is the ClusterTrustBundle of a signer, named as Kubernetes' hermetic test
// signer names it (test/utils/hermeticpodcertificatesigner): the first '/' becomes ':'.
func BundleName(signerName string) string {
	return strings.Replace(signerName, "/", ":", 1) + ":primary-bundle"
}

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=clustertrustbundles,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,verbs=attest,resourceNames=trustplane.io/pod-identity

// setupCA adds the controller that keeps the CA Secret's rotation moving and the
// ClusterTrustBundle current: it watches the one Secret (a cache limited to it) and the
// one bundle, so an edited or deleted bundle is restored at once.
func (r *Reconciler) setupCA(mgr ctrl.Manager) error {
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{r.opts.CANamespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", r.opts.CASecretName),
		}},
	})
	if err != nil {
		return err
	}
	if err := manager.AddCache(mgr, secrets); err != nil {
		return err
	}
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	bundleName := BundleName(r.opts.SignerName)
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == bundleName })
	kick := make(chan event.GenericEvent, 1)
	kick <- event.GenericEvent{Object: &corev1.Secret{}}
	return ctrl.NewControllerManagedBy(mgr).Named(Name + "-ca").
		WatchesRawSource(source.Kind(secrets, client.Object(&corev1.Secret{}), toKey)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&certificatesv1.ClusterTrustBundle{}), toKey, ours)).
		WatchesRawSource(source.Channel(kick, toKey)).
		Complete(reconcile.Func(r.reconcileCA))
}

// reconcileCA advances the rotation, persists it, and applies the bundle; it requeues at
// the rotation's next step.
func (r *Reconciler) reconcileCA(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rot, err := r.loadRotationLocked(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if rot == nil { // no good CA yet (the event says why): the Secret's next change retries
		return reconcile.Result{}, nil
	}
	now := r.opts.Clock.Now()
	next := rot.Clone()
	changed, err := next.Advance(now, r.opts.rotationPolicy(), r.generateCA)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		if err := r.persistLocked(ctx, next); err != nil {
			return reconcile.Result{}, err
		}
		log.FromContext(ctx).Info("CA rotation moved", "signing", next.Current.Fingerprint()[:16], "next", next.Next != nil, "previous", len(next.Previous))
		rot = next
	}
	observeCA(r.opts.SignerName, rot)
	if err := r.publishLocked(ctx, rot); err != nil {
		return reconcile.Result{}, err
	}
	if at := rot.NextChange(r.opts.rotationPolicy()); !at.IsZero() {
		return reconcile.Result{RequeueAfter: max(at.Sub(now), time.Second)}, nil
	}
	return reconcile.Result{}, nil
}

// caValidity is how long a generated CA is valid: long enough to sign through its turn
// and a missed one, plus the longest leaf. Without scheduled rotation, ten years.
func (r *Reconciler) caValidity() time.Duration {
	if r.opts.CARotation > 0 {
		return 2*r.opts.CARotation + r.opts.CAOverlap + r.opts.MaxLifetime
	}
	return 10 * 365 * 24 * time.Hour
}

func (r *Reconciler) generateCA(now time.Time) (*podcert.CAEntry, error) {
	return podcert.NewCA(r.opts.SignerName+" CA "+now.UTC().Format("2006-01-02T15:04:05Z"), now, r.caValidity())
}

// loadRotationLocked reads the CA Secret (fresh from the API server), creating it with a
// new CA when it does not exist. A Secret that does not parse never replaces the last
// good rotation: a Warning event InvalidCA on the Secret, and the last good CA signs on
// (nil when there never was one). r.mu is held.
func (r *Reconciler) loadRotationLocked(ctx context.Context) (*podcert.Rotation, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName}
	err := r.APIReader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		return r.bootstrapLocked(ctx)
	} else if err != nil {
		return nil, fmt.Errorf("reading CA Secret %s: %w", key, err)
	}
	if r.rot != nil && r.caVersion == secret.ResourceVersion {
		return r.rot, nil
	}
	rot, err := podcert.RotationFromSecret(secret.Data, secret.Annotations)
	if err != nil {
		if r.badVersion != secret.ResourceVersion {
			r.badVersion = secret.ResourceVersion
			r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonInvalidCA, "LoadCA", "CA Secret does not parse, the last good CA signs on: %v", err)
			log.FromContext(ctx).Error(err, "CA Secret does not parse; keeping the last good CA", "secret", key.String())
		}
		return r.rot, nil
	}
	if secret.Annotations[podcert.AnnotationReservedUntil] == "" {
		// A Secret from before rotation tracking: its CA may have signed leaves of up to the
		// longest lifetime until now, so it is reserved that far (persisted with the next write).
		rot.Current.Reserved = r.opts.Clock.Now().Add(r.opts.MaxLifetime + podcert.ReserveAhead)
	}
	if rot.NextError != nil && r.badNextVersion != secret.ResourceVersion {
		r.badNextVersion = secret.ResourceVersion
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonInvalidNextCA, "LoadCA", "next CA ignored: %v", rot.NextError)
	}
	r.rot, r.caVersion, r.secret = rot, secret.ResourceVersion, secret
	return rot, nil
}

func (r *Reconciler) bootstrapLocked(ctx context.Context) (*podcert.Rotation, error) {
	now := r.opts.Clock.Now()
	ca, err := r.generateCA(now)
	if err != nil {
		return nil, err
	}
	rot := &podcert.Rotation{Current: ca, SigningSince: now}
	data, annotations := rot.ToSecret()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName, Annotations: annotations,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "trustplane"}},
		Type: corev1.SecretTypeTLS, Data: data,
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica was first: read theirs next time
			return nil, fmt.Errorf("CA Secret appeared meanwhile: %w", err)
		}
		return nil, fmt.Errorf("creating CA Secret: %w", err)
	}
	log.FromContext(ctx).Info("created a self-signed CA for pod certificates", "secret", r.opts.CANamespace+"/"+r.opts.CASecretName)
	r.rot, r.caVersion, r.secret = rot, secret.ResourceVersion, secret
	return rot, nil
}

// persistLocked writes rot into the CA Secret (optimistic concurrency on the version it
// was read at) and makes it the rotation in use. On any error the next use reads again.
func (r *Reconciler) persistLocked(ctx context.Context, rot *podcert.Rotation) error {
	secret := r.secret.DeepCopy()
	data, annotations := rot.ToSecret()
	for _, k := range []string{podcert.NextCertKey, podcert.NextKeyKey, podcert.PreviousCertKey} {
		delete(secret.Data, k)
	}
	for _, k := range podcert.RotationAnnotations {
		delete(secret.Annotations, k)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	maps.Copy(secret.Data, data)
	maps.Copy(secret.Annotations, annotations)
	if err := r.Client.Update(ctx, secret); err != nil {
		r.rot, r.caVersion = nil, ""
		return fmt.Errorf("writing CA Secret: %w", err)
	}
	r.rot, r.caVersion, r.secret = rot, secret.ResourceVersion, secret
	return nil
}

// publishLocked server-side applies the signer's ClusterTrustBundle with rot's CAs and
// records them as published. r.mu is held.
func (r *Reconciler) publishLocked(ctx context.Context, rot *podcert.Rotation) error {
	ctb := certificatesv1ac.ClusterTrustBundle(BundleName(r.opts.SignerName)).
		WithLabels(r.bundleLabels(certificates.LabelCanaryingLive)).
		WithSpec(certificatesv1ac.ClusterTrustBundleSpec().WithSignerName(r.opts.SignerName).WithTrustBundle(rot.Bundle()))
	if err := r.Client.Apply(ctx, ctb, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ClusterTrustBundle: %w", err)
	}
	r.published = map[string]bool{}
	for _, e := range append([]*podcert.CAEntry{rot.Current, rot.Next}, rot.Previous...) {
		if e != nil {
			r.published[e.Fingerprint()] = true
		}
	}
	return nil
}

// bundleLabels are the labels of the signer's bundle at a stage of the rotation: the
// SPIFFE Filesystem Delivery draft's, so that a workload selects the bundle of its trust
// domain (it is its own peer: no federation yet) and of its stage.
func (r *Reconciler) bundleLabels(canarying string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by":        "trustplane",
		certificates.LabelCanarying:           canarying,
		certificates.LabelWorkloadTrustDomain: r.opts.TrustDomain,
		certificates.LabelPeerTrustDomain:     r.opts.TrustDomain,
	}
}

// reserve returns the CA to sign with after reserving notAfter on it (persisted first
// when the reservation grows, so that a restart never drops a CA whose leaf still lives).
func (r *Reconciler) reserve(ctx context.Context, notAfter func(*CA) (time.Time, error)) (*CA, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Signing uses the rotation in memory: reconcileCA reads the Secret afresh on every
	// change of it (the watch), and a failed write drops it. Reading the Secret from the
	// API server here, under the lock, would serialise every signature on a round trip.
	rot := r.rot
	if rot == nil {
		var err error
		if rot, err = r.loadRotationLocked(ctx); err != nil {
			return nil, err
		}
	}
	if rot == nil {
		return nil, fmt.Errorf("no usable CA in Secret %s/%s", r.opts.CANamespace, r.opts.CASecretName)
	}
	// A CA signs only once relying parties can know it: the first signature after start
	// (or after a CA Secret written by hand) may come before reconcileCA has published
	// the bundle, so it publishes first.
	if !r.published[rot.Current.Fingerprint()] {
		if err := r.publishLocked(ctx, rot); err != nil {
			return nil, err
		}
	}
	ca := &CA{Cert: rot.Current.Cert, Key: rot.Current.Key}
	until, err := notAfter(ca)
	if err != nil {
		return nil, err
	}
	next := rot.Clone()
	if next.Reserve(r.opts.Clock.Now(), until, r.opts.rotationPolicy()) {
		if err := r.persistLocked(ctx, next); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
