// Package jwks is the JWKSConfig controller: it publishes the public key of a TLS Secret
// as a JWK Set in a ConfigMap, rotates keys gracefully, runs nginx to serve the set, and
// serves every set itself (see server.go).
package jwks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/status"
)

const (
	// FieldOwner is the server-side apply field manager of everything this controller writes.
	FieldOwner = "trustplane-jwks"
	// Finalizer holds a JWKSConfig until its nginx objects (and, with cleanupOnDelete,
	// its ConfigMap) are gone.
	Finalizer = "jwks.trustplane.io/finalizer"
)

// Reconciler reconciles JWKSConfig objects.
type Reconciler struct {
	// Client reads JWKSConfigs from the manager's cache and writes.
	Client client.Client
	// Owned reads the objects the controller made, from its private label-scoped cache.
	Owned client.Reader
	// APIReader reads Secrets (never cached: private keys stay out of memory), once a
	// ConfigMap to adopt that is not labelled yet, and the objects to delete when finalizing.
	APIReader client.Reader
	// Recorder emits events through the events.k8s.io API.
	Recorder events.EventRecorder
	// Clock is injected so tests control rotation time.
	Clock clock.PassiveClock
	// Throttle spaces out ConfigMap updates of one set.
	Throttle *Throttle
	// Metrics records what happened; may be nil in tests of pure paths.
	Metrics *Metrics

	parsed sync.Map // types.NamespacedName → parsedCert
}

// parsedCert caches the last parse of a Secret's tls.crt, so an unchanged certificate
// (every resync) is not parsed again.
type parsedCert struct {
	fingerprint [32]byte
	key         jwks.Key
}

// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// Reconcile follows the seed's phases: get, finalizer, read the Secret, compute the set,
// apply the ConfigMap, apply nginx, record the outcome, one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting JWKSConfig: %w", err)
	}
	patcher := status.NewPatcher(cfg)
	result, err := r.reconcile(ctx, cfg)
	return patcher.Finish(ctx, r.Client, r.Recorder, result, err)
}

// reconcile publishes the set (or finalizes a deleted JWKSConfig) and marks it Ready; any
// other outcome is its error.
func (r *Reconciler) reconcile(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (ctrl.Result, error) {
	if !cfg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, cfg)
	}
	if !controllerutil.ContainsFinalizer(cfg, Finalizer) {
		patch := client.MergeFrom(cfg.DeepCopy())
		controllerutil.AddFinalizer(cfg, Finalizer)
		if err := r.Client.Patch(ctx, cfg, patch); err != nil {
			return ctrl.Result{}, status.WriteFailed("patch", cfg, err)
		}
	}
	result, err := r.publish(ctx, cfg, r.Clock.Now().Truncate(time.Second))
	if err != nil {
		return ctrl.Result{}, r.stallOnInputError(err)
	}
	status.MarkReady(cfg, jwksv1alpha1.ReasonPublished, fmt.Sprintf("Publishing %d key(s); current kid %s", cfg.Status.KeyCount, cfg.Status.LastKeyID))
	return result, nil
}

// stallOnInputError reports a certificate or set that cannot be published as Stalled: only
// a change to the Secret (or the spec) can fix it, and the Secret watch brings the
// JWKSConfig back when it changes. Other errors pass unchanged.
func (r *Reconciler) stallOnInputError(err error) error {
	var ie *jwks.InputError
	if !errors.As(err, &ie) {
		return err
	}
	r.Metrics.countInputError(ie.Reason)
	return status.Stalled(ie.Reason, "%s; the published set is unchanged", ie.Message)
}

// publish computes the set for the current certificate and makes the cluster match it.
func (r *Reconciler) publish(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (ctrl.Result, error) {
	if err := validateSpec(cfg); err != nil {
		return ctrl.Result{}, err
	}
	key, err := r.currentKey(ctx, cfg, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	cm, err := r.currentJWKSConfigMap(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	previous, err := restorePublished(cm)
	if err != nil {
		return ctrl.Result{}, err
	}
	next, nextRemoval := jwks.Plan(key, previous, policyOf(cfg), now)
	doc, err := jwks.Marshal(next)
	if err != nil {
		return ctrl.Result{}, err
	}

	desired := desiredJWKSConfigMap(cfg, doc, jwks.EncodeRetirements(next))
	if cm != nil {
		// The set is planned from what was read, maybe from a cache that has not seen our
		// last write yet: the API server refuses the apply (conflict, retried) rather than
		// let a stale plan drop a key.
		desired.ResourceVersion = cm.ResourceVersion
	}
	if cm == nil || r.changed(cm, desired) {
		id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
		if wait := r.Throttle.Wait(id, now, cm == nil); wait > 0 {
			log.FromContext(ctx).V(1).Info("ConfigMap update throttled", "wait", wait)
			return ctrl.Result{}, status.Waiting(jwksv1alpha1.ReasonUpdateThrottled,
				"the set changed within %v of its last update; the change is published at %s",
				r.Throttle.Interval, now.Add(wait).UTC().Format(time.RFC3339)).After(wait)
		}
		if err := r.apply(ctx, desired); err != nil {
			return ctrl.Result{}, err
		}
		if cm != nil { // creating a set is not an update: it does not start a window
			r.Throttle.Wrote(id, now)
		}
		r.announce(cfg, previous, next)
		cfg.Status.LastUpdateTime = &metav1.Time{Time: now}
		if nginxEnabled(cfg) {
			if err := r.refreshPods(ctx, cfg, desired); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.reconcileNginx(ctx, cfg, now); err != nil {
		return ctrl.Result{}, err
	}
	setKeyStatus(cfg, next)
	r.Metrics.observeSet(cfg, next)
	return ctrl.Result{RequeueAfter: nextWakeUp(now, nextRemoval, key.NotAfter)}, nil
}

// currentKey reads the Secret and parses tls.crt, reusing the last parse when the bytes
// have not changed.
func (r *Reconciler) currentKey(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (jwks.Key, error) {
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Spec.CertificateSecret}
	if err := r.APIReader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return jwks.Key{}, status.Waiting(jwksv1alpha1.ReasonSecretNotFound, "Secret %q does not exist; waiting for it", ref.Name).Warn()
		}
		return jwks.Key{}, fmt.Errorf("getting Secret %s: %w", ref.Name, err)
	}
	crt, ok := secret.Data[corev1.TLSCertKey]
	if !ok {
		return jwks.Key{}, &jwks.InputError{Reason: jwks.ReasonMissingCertificate, Message: fmt.Sprintf("Secret %q has no %s", ref.Name, corev1.TLSCertKey)}
	}
	id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	fp := sha256.Sum256(append([]byte(cfg.Spec.Algorithm+"\x00"), crt...))
	if v, ok := r.parsed.Load(id); ok && v.(parsedCert).fingerprint == fp {
		key := v.(parsedCert).key
		if now.After(key.NotAfter) {
			return jwks.Key{}, &jwks.InputError{Reason: jwks.ReasonCertificateExpired, Message: fmt.Sprintf("the certificate in Secret %q expired at %s", ref.Name, key.NotAfter.UTC().Format(time.RFC3339))}
		}
		return key, nil
	}
	key, err := jwks.ParseChain(crt, cfg.Spec.Algorithm, now)
	if err != nil {
		var ie *jwks.InputError
		if errors.As(err, &ie) {
			ie.Message = fmt.Sprintf("Secret %q: %s", ref.Name, ie.Message)
		}
		return jwks.Key{}, err
	}
	r.parsed.Store(id, parsedCert{fingerprint: fp, key: key})
	return key, nil
}

// currentJWKSConfigMap returns the published ConfigMap, or nil. One not labelled as ours
// yet (made by hand, or by another operator before) is read once from the API server so
// that its keys are kept when it is adopted.
func (r *Reconciler) currentJWKSConfigMap(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (*corev1.ConfigMap, error) {
	key := types.NamespacedName{Namespace: cfg.Namespace, Name: jwksConfigMapName(cfg)}
	cm := &corev1.ConfigMap{}
	err := r.Owned.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, cm)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting ConfigMap %s: %w", key.Name, err)
	}
	return cm, nil
}

// restorePublished reads the previous set back. A document that does not parse is not
// overwritten: it may hold keys that tokens in flight still need.
func restorePublished(cm *corev1.ConfigMap) ([]jwks.PublishedKey, error) {
	if cm == nil || cm.Data[jwks.DocumentKey] == "" {
		return nil, nil
	}
	retirements, err := jwks.DecodeRetirements(cm.Annotations[RetirementsAnnotation])
	if err != nil {
		// Losing retirement times only keeps old keys longer (they count as retired now).
		retirements = nil
	}
	keys, err := jwks.Restore([]byte(cm.Data[jwks.DocumentKey]), retirements)
	if err != nil {
		var ie *jwks.InputError
		if errors.As(err, &ie) {
			ie.Message = fmt.Sprintf("ConfigMap %q: %s; fix or delete it, it is left untouched", cm.Name, ie.Message)
		}
		return nil, err
	}
	return keys, nil
}

// reconcileNginx applies (or, when disabled, removes) the nginx ConfigMap, Deployment
// and Service.
func (r *Reconciler) reconcileNginx(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) error {
	objs := []client.Object{desiredNginxConfigMap(cfg), desiredDeployment(cfg), desiredService(cfg)}
	if !nginxEnabled(cfg) {
		return r.deleteOwned(ctx, r.Owned, cfg, objs...)
	}
	for i, obj := range objs {
		current := obj.DeepCopyObject().(client.Object)
		err := r.Owned.Get(ctx, client.ObjectKeyFromObject(obj), current)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting %T %s: %w", obj, obj.GetName(), err)
		}
		if err == nil && !r.changed(current, obj) {
			continue
		}
		if err := r.apply(ctx, obj); err != nil {
			return err
		}
		if i == 0 {
			cfg.Status.NginxConfigUpdated = &metav1.Time{Time: now}
		}
	}
	return nil
}

// refreshPods bumps an annotation on the running nginx pods so their kubelets resync
// the JWKS volume now rather than on their next periodic sync.
func (r *Reconciler) refreshPods(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap) error {
	pods := &corev1.PodList{}
	if err := r.Owned.List(ctx, pods, client.InNamespace(cfg.Namespace), client.MatchingLabels(podLabels(cfg))); err != nil {
		return fmt.Errorf("listing nginx pods: %w", err)
	}
	content := hashOf(cm.Data)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Annotations[PodContentAnnotation] == content || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, PodContentAnnotation, content))
		if err := r.Client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return status.WriteFailed("patch", pod, err)
		}
	}
	return nil
}

// finalize removes what the JWKSConfig made, then its finalizer.
func (r *Reconciler) finalize(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) error {
	if !controllerutil.ContainsFinalizer(cfg, Finalizer) {
		return nil
	}
	objs := []client.Object{desiredDeployment(cfg), desiredService(cfg), desiredNginxConfigMap(cfg)}
	if cfg.Spec.CleanupOnDelete {
		objs = append(objs, desiredJWKSConfigMap(cfg, nil, ""))
	}
	if err := r.deleteOwned(ctx, r.APIReader, cfg, objs...); err != nil {
		return err
	}
	patch := client.MergeFrom(cfg.DeepCopy())
	controllerutil.RemoveFinalizer(cfg, Finalizer)
	if err := r.Client.Patch(ctx, cfg, patch); client.IgnoreNotFound(err) != nil {
		return status.WriteFailed("patch", cfg, err)
	}
	r.forget(types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name})
	return nil
}

// deleteOwned deletes objects that carry this JWKSConfig's owner label; an object of
// the same name that someone else made is never deleted. It looks them up with from:
// the cache on the steady path, the API server when finalizing (an object the cache
// has not seen yet must not be left behind).
func (r *Reconciler) deleteOwned(ctx context.Context, from client.Reader, cfg *jwksv1alpha1.JWKSConfig, objs ...client.Object) error {
	for _, obj := range objs {
		current := obj.DeepCopyObject().(client.Object)
		if err := from.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting %T %s: %w", obj, obj.GetName(), err)
		}
		if current.GetLabels()[OwnerLabel] != cfg.Name {
			continue
		}
		precondition := client.Preconditions{UID: ptrTo(current.GetUID())}
		if err := r.Client.Delete(ctx, current, precondition); client.IgnoreNotFound(err) != nil {
			return status.WriteFailed("delete", current, err)
		}
	}
	return nil
}

// apply server-side applies obj with the controller's field owner, recording the hash
// of the desired state so that an unchanged object is never written again.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	u, hash, err := r.applyObject(obj)
	if err != nil {
		return err
	}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DesiredHashAnnotation] = hash
	u.SetAnnotations(annotations)
	u.SetResourceVersion(obj.GetResourceVersion()) // a precondition when set, never hashed
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return status.WriteFailed("apply", u, err)
	}
	r.Metrics.countWrite(u.GetKind())
	return nil
}

// applyObject is obj as an apply configuration and the hash of that configuration.
func (r *Reconciler) applyObject(obj client.Object) (*unstructured.Unstructured, string, error) {
	u, err := apply.Configuration(r.Client, obj)
	if err != nil {
		return nil, "", err
	}
	return u, hashOf(u.Object), nil
}

// changed says whether current differs from desired, by the hash recorded at apply.
func (r *Reconciler) changed(current, desired client.Object) bool {
	_, hash, err := r.applyObject(desired)
	return err != nil || current.GetAnnotations()[DesiredHashAnnotation] != hash
}

func hashOf(v any) string {
	raw, _ := json.Marshal(v) // maps marshal with sorted keys: stable
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// announce emits events for what changed in the set.
func (r *Reconciler) announce(cfg *jwksv1alpha1.JWKSConfig, previous, next []jwks.PublishedKey) {
	prevKids := map[string]bool{}
	for _, k := range previous {
		prevKids[k.KeyID()] = true
	}
	nextKids := map[string]bool{}
	for _, k := range next {
		nextKids[k.KeyID()] = true
	}
	current := next[0].KeyID()
	switch {
	case len(previous) == 0:
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, "Published", "Publish", "Published key %s", current)
	case previous[0].KeyID() != current:
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, "KeyRotated", "Rotate", "Current key is now %s (was %s)", current, previous[0].KeyID())
	default:
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, "Updated", "Publish", "Updated key %s", current)
	}
	for kid := range prevKids {
		if !nextKids[kid] {
			r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, "KeyRemoved", "Remove", "Removed retired key %s", kid)
		}
	}
}

func setKeyStatus(cfg *jwksv1alpha1.JWKSConfig, keys []jwks.PublishedKey) {
	cfg.Status.LastKeyID = keys[0].KeyID()
	cfg.Status.KeyCount = int32(len(keys)) //nolint:gosec // a set holds a handful of keys
	cfg.Status.Keys = make([]jwksv1alpha1.PublishedKey, 0, len(keys))
	for _, k := range keys {
		pk := jwksv1alpha1.PublishedKey{KeyID: k.KeyID(), Algorithm: k.JWK.Algorithm}
		if !k.NotAfter.IsZero() {
			pk.NotAfter = &metav1.Time{Time: k.NotAfter.UTC()}
		}
		if k.RetiredAt != nil {
			pk.RetiredAt = &metav1.Time{Time: k.RetiredAt.UTC()}
		}
		cfg.Status.Keys = append(cfg.Status.Keys, pk)
	}
}

// nextWakeUp is when to reconcile again with no other change: when a retired key is due
// to go, or when the current certificate expires (to report it).
func nextWakeUp(now, nextRemoval, notAfter time.Time) time.Duration {
	wake := notAfter.Add(time.Second)
	if !nextRemoval.IsZero() && nextRemoval.Before(wake) {
		wake = nextRemoval
	}
	if d := wake.Sub(now); d > 0 {
		return d
	}
	return time.Second
}

func (r *Reconciler) forget(id types.NamespacedName) {
	r.parsed.Delete(id)
	r.Throttle.Forget(id)
	r.Metrics.forget(id)
}

func ptrTo[T any](v T) *T { return &v }
