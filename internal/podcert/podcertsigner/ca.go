package podcertsigner

import (
	"context"
	"crypto/x509"
	"errors"
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
	"k8s.io/apimachinery/pkg/util/resourceversion"
	certificatesv1ac "k8s.io/client-go/applyconfigurations/certificates/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
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

// setupCA adds two controllers of the one CA Secret, read through a cache limited to it.
// On every replica, leader or not, watchCA keeps the CA loaded and checked, so that a
// replica that becomes leader signs at once from the CA it already holds. On the leader
// alone, reconcileCA keeps the rotation moving and the ClusterTrustBundle current (it
// watches the one bundle too, so an edited or deleted bundle is restored at once): only
// the leader writes the Secret and the bundle.
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
	r.secrets = secrets
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	if err := ctrl.NewControllerManagedBy(mgr).Named(Name + "-ca-watch").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(secrets, client.Object(&corev1.Secret{}), toKey)).
		WatchesRawSource(source.Channel(kicked(), toKey)).
		Complete(reconcile.Func(r.watchCA)); err != nil {
		return err
	}
	bundleName, previewName := BundleName(r.opts.SignerName), PreviewBundleName(r.opts.SignerName)
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == bundleName || o.GetName() == previewName })
	b := ctrl.NewControllerManagedBy(mgr).Named(Name + "-ca").
		WatchesRawSource(source.Kind(secrets, client.Object(&corev1.Secret{}), toKey)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&certificatesv1.ClusterTrustBundle{}), toKey, ours)).
		WatchesRawSource(source.Channel(kicked(), toKey))
	if r.opts.CanaryObservation > 0 {
		// A namespace or node that becomes a canary, or stops being one, moves the
		// observation (it begins, or begins again).
		b = b.WatchesMetadata(&corev1.Namespace{}, toKey, builder.WithPredicates(selectionChanged(r.opts.canaryNamespaces))).
			WatchesMetadata(&corev1.Node{}, toKey, builder.WithPredicates(selectionChanged(r.opts.canaryNodes)))
		if b, err = r.watchCanaryTroubles(mgr, b, toKey); err != nil {
			return err
		}
	}
	return b.Complete(reconcile.Func(r.reconcileCA))
}

// kicked is a source that fires once at start: the Secret may not exist yet.
func kicked() chan event.GenericEvent {
	kick := make(chan event.GenericEvent, 1)
	kick <- event.GenericEvent{Object: &corev1.Secret{}}
	return kick
}

// recheckRefused is how often a replica reads again a CA Secret it refused: a CA that is
// not valid yet becomes valid with time alone, not with a change of the Secret.
const recheckRefused = podcert.CAClockSkew

// watchCA loads the cached CA Secret into this replica, leader or not, and checks it
// (adoptLocked); it never writes. The leader's reconcileCA reads the Secret afresh too.
func (r *Reconciler) watchCA(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	secret := &corev1.Secret{}
	err := r.secrets.Get(ctx, req.NamespacedName, secret)
	if apierrors.IsNotFound(err) { // the leader creates it; its creation is an event here
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading CA Secret %s from the cache: %w", req.NamespacedName, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rot := r.adoptLocked(ctx, secret); rot != nil { // a follower's metrics too
		observeCA(r.opts.SignerName, rot)
	}
	if r.caVersion != secret.ResourceVersion {
		return reconcile.Result{RequeueAfter: recheckRefused}, nil
	}
	return reconcile.Result{}, nil
}

// SigningCA is the CA certificate this replica would sign with now (nil: none usable
// loaded yet), whether or not it leads.
func (r *Reconciler) SigningCA() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rot == nil {
		return nil
	}
	return r.rot.Current.Cert
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
	if rot == nil { // no good CA yet (the event says why): the Secret's next change retries,
		// or time alone for a CA not valid yet
		return reconcile.Result{RequeueAfter: recheckRefused}, nil
	}
	now := r.opts.Clock.Now()
	step, err := r.stepRotationLocked(ctx, rot, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	if step.changed {
		if err := r.persistLocked(ctx, step.rot, step.annotations); err != nil {
			return reconcile.Result{}, err
		}
		log.FromContext(ctx).Info("CA rotation moved", "signing", short(step.rot.Current), "next", short(step.rot.Next),
			"stage", stageName(step.rot), "previous", len(step.rot.Previous))
		for _, e := range step.events { // recorded once the step is written: a restart never repeats one
			r.Recorder.Eventf(r.secret, nil, e.eventType, e.reason, "RotateCA", "%s", e.message)
		}
		rot = step.rot
	}
	observeCA(r.opts.SignerName, rot)
	observeRotationState(r.opts.SignerName, step.state)
	r.observing.Store(step.state == stateObserving)
	if err := r.publishLocked(ctx, rot); err != nil {
		return reconcile.Result{}, err
	}
	at := rot.NextChange(r.opts.rotationPolicy())
	if !step.wakeAt.IsZero() && (at.IsZero() || step.wakeAt.Before(at)) {
		at = step.wakeAt
	}
	if !at.IsZero() {
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

// loadRotationLocked reads the CA Secret fresh from the API server (the leader, before it
// writes), creating it with a new CA when it does not exist, and adopts it (adoptLocked):
// nil when no good CA was ever loaded. r.mu is held.
func (r *Reconciler) loadRotationLocked(ctx context.Context) (*podcert.Rotation, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName}
	err := r.APIReader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		return r.bootstrapLocked(ctx)
	} else if err != nil {
		return nil, fmt.Errorf("reading CA Secret %s: %w", key, err)
	}
	return r.adoptLocked(ctx, secret), nil
}

// adoptLocked makes the rotation in secret the one in use, unless it is not newer than
// the one held (the cache may lag behind the leader's own write) or fails a check of
// RotationFromSecret: a Secret that fails one never replaces the last good rotation — a
// Warning event InvalidCA on the Secret naming the check, once per version, and the last
// good CA signs on (nil when there never was one). r.mu is held.
func (r *Reconciler) adoptLocked(ctx context.Context, secret *corev1.Secret) *podcert.Rotation {
	if r.rot != nil && !r.stale && !newerVersion(secret.ResourceVersion, r.caVersion) {
		return r.rot
	}
	rot, err := podcert.RotationFromSecret(secret.Data, secret.Annotations, r.opts.Clock.Now())
	if err != nil {
		if r.badVersion != secret.ResourceVersion {
			r.badVersion = secret.ResourceVersion
			r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, certificates.ReasonInvalidCA, "LoadCA", "CA Secret refused, the last good CA signs on: %v", err)
			log.FromContext(ctx).Error(err, "CA Secret refused; keeping the last good CA", "secret", client.ObjectKeyFromObject(secret).String())
		}
		return r.rot
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
	r.rot, r.caVersion, r.secret, r.stale = rot, secret.ResourceVersion, secret, false
	r.wakeWaiting()
	return rot
}

// newerVersion says whether resource version a is later than b (any a is, when b is
// empty; a differing one is, when either does not compare).
func newerVersion(a, b string) bool {
	if b == "" {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a != b
	}
	return cmp > 0
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
func (r *Reconciler) persistLocked(ctx context.Context, rot *podcert.Rotation, extra map[string]string) error {
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
	for k, v := range extra {
		if v == "" {
			delete(secret.Annotations, k)
		} else {
			secret.Annotations[k] = v
		}
	}
	if err := r.Client.Update(ctx, secret); err != nil {
		// Read again before the next use; until a good one is read the last good CA stays.
		r.stale = true
		return fmt.Errorf("writing CA Secret: %w", err)
	}
	r.rot, r.caVersion, r.secret, r.stale = rot, secret.ResourceVersion, secret, false
	return nil
}

// publishLocked server-side applies the signer's ClusterTrustBundle with rot's CAs and
// records them as published. r.mu is held.
func (r *Reconciler) publishLocked(ctx context.Context, rot *podcert.Rotation) error {
	// The rotation's condition is on the bundles too, where `trustplane get signerca` and
	// anyone who may read bundles (not the CA Secret) sees it.
	status := map[string]string{}
	if reason, message := r.rotationStatus(rot); reason != "" {
		status[certificates.AnnotationCARotationStatus] = reason + ": " + message
	}
	ctb := certificatesv1ac.ClusterTrustBundle(BundleName(r.opts.SignerName)).
		WithLabels(r.bundleLabels(certificates.LabelCanaryingLive)).WithAnnotations(status).
		WithSpec(certificatesv1ac.ClusterTrustBundleSpec().WithSignerName(r.opts.SignerName).WithTrustBundle(rot.Bundle()))
	if err := r.Client.Apply(ctx, ctb, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ClusterTrustBundle: %w", err)
	}
	if r.opts.CanaryObservation > 0 {
		// The canaries load the preview bundle alone, so it always holds every CA.
		preview := certificatesv1ac.ClusterTrustBundle(PreviewBundleName(r.opts.SignerName)).
			WithLabels(r.bundleLabels(certificates.LabelCanaryingPreview)).
			WithAnnotations(map[string]string{certificates.AnnotationCanaryNamespaceSelector: r.opts.CanaryNamespaceSelector, certificates.AnnotationCanaryNodeSelector: r.opts.CanaryNodeSelector}).
			WithAnnotations(status).
			WithSpec(certificatesv1ac.ClusterTrustBundleSpec().WithSignerName(r.opts.SignerName).WithTrustBundle(rot.PreviewBundle()))
		if err := r.Client.Apply(ctx, preview, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the preview ClusterTrustBundle: %w", err)
		}
	}
	// Only what every workload trusts may sign: the live bundle's CAs.
	live := []*podcert.CAEntry{rot.Current}
	if rot.Canary.Stage != podcert.StagePreview {
		live = append(live, rot.Next)
	}
	r.published = map[string]bool{}
	for _, e := range append(live, rot.Previous...) {
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
// When no CA can sign now, or the reservation cannot be recorded, the error is a
// *waitingForCA: the request waits, it is not denied.
func (r *Reconciler) reserve(ctx context.Context, notAfter func(*CA) (time.Time, error)) (*CA, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Signing uses the rotation in memory: every replica's watchCA loads each change of
	// the Secret (the watch), and a failed write marks it stale. Reading the Secret from
	// the API server on every signature, under the lock, would serialise them on a round trip.
	rot := r.rot
	if rot == nil || r.stale {
		var err error
		if rot, err = r.loadRotationLocked(ctx); err != nil {
			return nil, &waitingForCA{err}
		}
	}
	if rot == nil {
		return nil, &waitingForCA{fmt.Errorf("no usable CA in Secret %s/%s (see its InvalidCA events)", r.opts.CANamespace, r.opts.CASecretName)}
	}
	if err := rot.Current.CheckValidAt(r.opts.Clock.Now()); err != nil {
		return nil, &waitingForCA{err}
	}
	// A CA signs only once relying parties can know it: the first signature after start,
	// after this replica became leader, or after a CA Secret written by hand may come
	// before reconcileCA has published the bundle, so it publishes first.
	if !r.published[rot.Current.Fingerprint()] {
		if err := r.publishLocked(ctx, rot); err != nil {
			return nil, err
		}
	}
	ca := &CA{Cert: rot.Current.Cert, Key: rot.Current.Key}
	until, err := notAfter(ca)
	var denial *Denial
	if errors.As(err, &denial) {
		return nil, err
	} else if err != nil { // the CA ends too soon for the shortest leaf: it needs rotating
		return nil, &waitingForCA{err}
	}
	next := rot.Clone()
	if next.Reserve(r.opts.Clock.Now(), until, r.opts.rotationPolicy()) {
		if err := r.persistLocked(ctx, next, nil); err != nil {
			return nil, &waitingForCA{fmt.Errorf("reserving the leaf's lifetime: %w", err)}
		}
	}
	return ca, nil
}

// waitingForCA is why a request cannot be signed now although nothing is wrong with it:
// the CA Secret is unreadable, refused or mid-rotation, its CA not valid now, or a
// reservation cannot be written. Reconcile retries such a request and never concludes it.
type waitingForCA struct{ err error }

func (e *waitingForCA) Error() string { return "waiting for a usable CA: " + e.err.Error() }
func (e *waitingForCA) Unwrap() error { return e.err }

// noteWaiting records once per request (until the CA is back) why it waits: a Warning
// event WaitingForCA on it, as the API allows no condition but Issued, Denied or Failed
// (k8s.io/kubernetes pkg/apis/certificates/validation ValidatePodCertificateRequestStatusUpdate).
func (r *Reconciler) noteWaiting(pcr *certificatesv1.PodCertificateRequest, why error) {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	key := client.ObjectKeyFromObject(pcr)
	if r.waiting[key] {
		return
	}
	if r.waiting == nil {
		r.waiting = map[types.NamespacedName]bool{}
	}
	r.waiting[key] = true
	r.Recorder.Eventf(pcr, nil, corev1.EventTypeWarning, certificates.ReasonWaitingForCA, "Sign", "%v", why)
}

// wakeWaiting asks for the waiting requests to be signed now that a CA was loaded, rather
// than at their next retry, which backs off to minutes.
func (r *Reconciler) wakeWaiting() {
	select {
	case r.wake <- event.GenericEvent{Object: &certificatesv1.PodCertificateRequest{}}:
	default: // a wake-up is already queued, or no controller (tests)
	}
}

// takeWaiting is the requests woken up, forgotten so that a new wait is recorded again.
func (r *Reconciler) takeWaiting(context.Context, client.Object) []reconcile.Request {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	reqs := make([]reconcile.Request, 0, len(r.waiting))
	for key := range r.waiting {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	r.waiting = nil
	return reqs
}
