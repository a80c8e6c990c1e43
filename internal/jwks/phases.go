package jwks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// publish computes the set for the current certificate and makes the cluster match it.
func (r *Reconciler) publish(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (ctrl.Result, error) {
	if err := validateSpec(cfg); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Limits.check(cfg); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.claimIssuer(ctx, cfg, now); err != nil {
		return ctrl.Result{}, err
	}
	key, err := r.currentKey(ctx, cfg, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	cm, source, err := r.publishedConfigMap(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	previous, err := r.restore(cfg, source)
	if err != nil {
		return ctrl.Result{}, err
	}
	signing, err := r.signingState(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	keep, promoteAtOnce := signingPolicy(cfg, key.KeyID(), signing)
	if keep != "" && !slices.ContainsFunc(previous, func(k jwkset.PublishedKey) bool { return k.KeyID() == keep }) {
		// The key signers use is not in the set any more (only a lost ConfigMap and status
		// can do that): the current key, which is, signs from now on.
		keep, promoteAtOnce = "", true
	}
	next, doc, nextRemoval, err := planSet(cfg, key, previous, keep, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired, err := desiredJWKSConfigMap(cfg, doc, jwkset.EncodeRetirements(next))
	if err != nil {
		return ctrl.Result{}, err
	}
	if cm != nil {
		// The set is planned from what was read, maybe from a cache that has not seen our
		// last write yet: the API server refuses the apply (conflict, retried) rather than
		// let a stale plan drop a key.
		desired.ResourceVersion = cm.ResourceVersion
	}
	if cm == nil || r.drifted(cm, desired) {
		id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
		// Creating a set, or putting back one someone else changed, is never throttled:
		// the interval spaces out this controller's own changes, not repairs.
		repair := cm != nil && apply.WrittenBy(cm, FieldOwner) && !r.ownsDocument(cm)
		if wait := r.Throttle.Wait(id, now, cm == nil || repair); wait > 0 {
			log.FromContext(ctx).V(1).Info("ConfigMap update throttled", "wait", wait)
			return ctrl.Result{}, status.Waiting(jwksv1alpha1.ReasonUpdateThrottled,
				"the set changed within %v of its last update; the change is published at %s, the previous set is served until then",
				r.Throttle.Interval, now.Add(wait).UTC().Format(time.RFC3339)).After(wait).KeepReady()
		}
		var err error
		if cm == nil && createsFirst(cfg) {
			err = r.create(ctx, cfg, desired)
		} else {
			err = r.apply(ctx, desired)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		r.awaitOwnedCache(ctx, id, desired, doc)
		if cm != nil && !repair { // creating a set is not an update: it does not start a window
			r.Throttle.Wrote(id, now)
		}
		if repair {
			r.Recorder.Eventf(cfg, cm, corev1.EventTypeWarning, jwksv1alpha1.ReasonDriftReverted, "Publish",
				"ConfigMap %q was changed by someone else; the published set (%d keys) was put back", cm.Name, len(next))
		}
		r.announce(cfg, previous, next)
		cfg.Status.LastUpdateTime = &metav1.Time{Time: now}
		if nginxEnabled(cfg) {
			if err := r.refreshPods(ctx, cfg, desired); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.removeRenamed(ctx, cfg); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileNginx(ctx, cfg, now); err != nil {
		return ctrl.Result{}, err
	}
	setKeyStatus(cfg, next)
	r.Metrics.observeSet(cfg, next)
	if err := r.checkServed(ctx, cfg, doc); err != nil {
		return ctrl.Result{}, err
	}
	promotion, err := r.promote(ctx, cfg, key.KeyID(), signing, promoteAtOnce, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	wake := nextWakeUp(now, nextRemoval, key.NotAfter)
	if promotion > 0 {
		wake = min(wake, promotion)
	}
	return ctrl.Result{RequeueAfter: wake}, nil
}

// ownedCacheWait is the longest a reconcile waits for its own cache to show the set it
// has just written.
const ownedCacheWait = time.Second

// awaitOwnedCache waits, at most ownedCacheWait, until the private cache (which
// trustplane's server answers from, and checkServed reads) holds the document just
// written to cm. Without it most reconciles of a new set would find the cache a moment
// behind, store a ServerSyncing status, and come back for a second status write once
// the watch brought the ConfigMap: one write more per set for nothing new. After the wait
// it is as before: ServerSyncing, and the watch brings the JWKSConfig back.
//
// The watch event of the version written (cm's resourceVersion, as create and apply leave
// it) is the echo of this reconcile's own write, and is expected (ownWrites) before the
// cache can show it: a reconcile that has seen its write in the cache has acted on all
// the echo would show. One that gives up waiting takes the expectation back, so the echo
// still brings the JWKSConfig back; if the echo came in between, the cache already holds
// the version, and checkServed, which reads it next, sees it.
func (r *Reconciler) awaitOwnedCache(ctx context.Context, id types.NamespacedName, cm client.Object, doc []byte) {
	r.ownWrites.expect(id, cm)
	key := client.ObjectKeyFromObject(cm)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, ownedCacheWait, true, func(ctx context.Context) (bool, error) {
		cached := &corev1.ConfigMap{}
		if err := r.Owned.Get(ctx, key, cached); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cached.Data[jwkset.DocumentKey] == string(doc), nil
	})
	if err != nil {
		r.ownWrites.unexpect(id, cm)
	}
}

// planSet is the next set and its document: jwkset.Plan under the spec's policy, within the
// size a ConfigMap can hold (retired keys leave early, oldest first, to fit).
func planSet(cfg *jwksv1alpha1.JWKSConfig, key jwkset.Key, previous []jwkset.PublishedKey, signing string, now time.Time) ([]jwkset.PublishedKey, []byte, time.Time, error) {
	policy := policyOf(cfg)
	policy.Signing = signing
	next, nextRemoval := jwkset.Plan(key, previous, policy, now)
	kept, doc, err := jwkset.MarshalWithin(next, jwkset.MaxDocumentBytes)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if len(kept) < len(next) {
		// The removal that was due may belong to a key that no longer fits.
		nextRemoval = jwkset.EarliestRemoval(kept, policy.OldKeysTTL)
	}
	return kept, doc, nextRemoval, nil
}

// publishedConfigMap returns the JWKS ConfigMap named by the spec (nil if it does not
// exist yet) and the one to read the previous set from: the same one, or, right after
// spec.configMapName changed, the ConfigMap this JWKSConfig published in before, so that
// the set moves with its retired keys. A ConfigMap of that name that is not this
// JWKSConfig's is never read or written (NameInUse).
//
// When the set is created with a plain create (createsFirst), a ConfigMap the private
// cache does not hold is taken to be absent without asking the API server: the create
// finds out if it is not (see create).
func (r *Reconciler) publishedConfigMap(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (current, source *corev1.ConfigMap, err error) {
	obj, err := r.claimAsking(ctx, cfg, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: jwksConfigMapName(cfg)}}, !createsFirst(cfg))
	if err != nil {
		return nil, nil, err
	}
	if obj != nil {
		cm := obj.(*corev1.ConfigMap)
		return cm, cm, nil
	}
	renamed, err := r.renamedConfigMaps(ctx, cfg)
	if err != nil || len(renamed) == 0 {
		return nil, nil, err
	}
	return nil, &renamed[0], nil
}

// renamedConfigMaps are the JWKS ConfigMaps this JWKSConfig made under names it no
// longer uses (spec.configMapName changed), by name.
func (r *Reconciler) renamedConfigMaps(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) ([]corev1.ConfigMap, error) {
	list := &corev1.ConfigMapList{}
	var mine client.ListOption = client.MatchingLabels{OwnerLabel: cfg.Name}
	if r.OwnedIndexed {
		mine = client.MatchingFields{ownerIndex: cfg.Name}
	}
	if err := r.Owned.List(ctx, list, client.InNamespace(cfg.Namespace), mine); err != nil {
		return nil, fmt.Errorf("listing the ConfigMaps of JWKSConfig %s: %w", cfg.Name, err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		_, isSet := cm.Annotations[RetirementsAnnotation]
		if isSet && cm.Name != jwksConfigMapName(cfg) && cm.Name != nginxConfigMapName(cfg) {
			out = append(out, cm)
		}
	}
	slices.SortFunc(out, func(a, b corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// removeRenamed deletes the JWKS ConfigMaps left under an old name once the set is
// published under the new one.
func (r *Reconciler) removeRenamed(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) error {
	renamed, err := r.renamedConfigMaps(ctx, cfg)
	if err != nil {
		return err
	}
	for i := range renamed {
		old := &renamed[i]
		err := r.Client.Delete(ctx, old, client.Preconditions{UID: ptrTo(old.UID)})
		if apierrors.IsNotFound(err) {
			continue // deleted by an earlier reconcile; the cache had not seen it go
		}
		if err != nil {
			return status.WriteFailed("delete", old, err)
		}
		r.Recorder.Eventf(cfg, old, corev1.EventTypeNormal, jwksv1alpha1.ReasonConfigMapMoved, "Delete", "The set moved to ConfigMap %q; deleted %q", jwksConfigMapName(cfg), old.Name)
	}
	return nil
}

// claim returns the existing object named like obj if it is this JWKSConfig's (it
// carries OwnerLabel with this JWKSConfig's name), or nil when there is none. One made for
// another JWKSConfig, or by anyone else, is never adopted, overwritten or deleted: that
// is NameInUse, until its name is freed or it is labelled over to this JWKSConfig.
func (r *Reconciler) claim(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, obj client.Object) (client.Object, error) {
	return r.claimAsking(ctx, cfg, obj, true)
}

// claimAsking is claim; when askServer is false, an object the private cache does not
// hold is taken to be absent.
func (r *Reconciler) claimAsking(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, obj client.Object, askServer bool) (client.Object, error) {
	current := obj.DeepCopyObject().(client.Object)
	key := client.ObjectKeyFromObject(obj)
	err := r.Owned.Get(ctx, key, current)
	if apierrors.IsNotFound(err) && askServer {
		// The private cache holds only labelled objects: ask the API server whether an
		// unlabelled one (someone else's) is in the way, or ours is not cached yet.
		err = r.APIReader.Get(ctx, key, current)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if err != nil {
		return nil, fmt.Errorf("getting %s %s: %w", kind, key.Name, err)
	}
	if owner := current.GetLabels()[OwnerLabel]; owner != cfg.Name {
		whose := "was not made by trustplane"
		if owner != "" {
			whose = fmt.Sprintf("belongs to JWKSConfig %q", owner)
		}
		return nil, status.Stalled(jwksv1alpha1.ReasonNameInUse,
			"%s %q already exists and %s; it is left untouched: choose another name, delete it, or label it %s=%s to hand it over",
			kind, key.Name, whose, OwnerLabel, cfg.Name)
	}
	return current, nil
}

// restore reads the previous set from cm (nil: none). When someone else has written the
// set since this controller last did (the document's field has moved to another
// manager), only the keys this JWKSConfig published (status.keys) are taken back: a key
// slipped into the ConfigMap is never published. A ConfigMap handed over by labelling,
// never written by this controller, is taken as it is.
//
// Whatever the ConfigMap says, the keys status.keys records (written by the manager only)
// are taken back too: a ConfigMap edited, emptied or replaced never makes a retired key
// inside its TTL leave the set (jwkset.Plan drops what the policy says must go).
func (r *Reconciler) restore(cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap) ([]jwkset.PublishedKey, error) {
	keys, err := restorePublished(cm)
	if err != nil {
		return nil, err
	}
	if cm != nil && apply.WrittenBy(cm, FieldOwner) && !r.ownsDocument(cm) {
		published := map[string]bool{}
		for _, k := range cfg.Status.Keys {
			published[k.KeyID] = true
		}
		keys = slices.DeleteFunc(keys, func(k jwkset.PublishedKey) bool { return !published[k.KeyID()] })
	}
	return append(keys, recordedKeys(cfg, keys)...), nil
}

// recordedKeys are the keys of status.keys that are not in keys, rebuilt from their
// recorded public JWK (without x5c, which status does not keep).
func recordedKeys(cfg *jwksv1alpha1.JWKSConfig, keys []jwkset.PublishedKey) []jwkset.PublishedKey {
	have := map[string]bool{}
	for _, k := range keys {
		have[k.KeyID()] = true
	}
	var out []jwkset.PublishedKey
	for _, pk := range cfg.Status.Keys {
		if have[pk.KeyID] || pk.PublicKey == "" {
			continue
		}
		k, err := jwkset.ParsePublicJWK(pk.KeyID, pk.PublicKey)
		if err != nil {
			continue // not ours to repair: status is written by this controller only
		}
		restored := jwkset.PublishedKey{Key: k}
		if pk.NotAfter != nil {
			restored.NotAfter = pk.NotAfter.Time
		}
		if pk.RetiredAt != nil {
			restored.RetiredAt = &pk.RetiredAt.Time
		}
		out = append(out, restored)
	}
	return out
}

// createsFirst says whether the JWKS ConfigMap is made with a plain create, one request
// where asking whether the name is free and an apply that creates would cost two (and the
// create costs the API server about half of that apply). Not with an issuer: its
// discovery document is a key of the ConfigMap only while spec.issuer is set, and a key a
// create wrote would stay after it goes (server-side apply removes only what it applied).
// Later changes are applied; until the first, the create's fields count as the
// controller's own (apply.Owned).
func createsFirst(cfg *jwksv1alpha1.JWKSConfig) bool { return cfg.Spec.Issuer == "" }

// create creates obj with the controller's field owner, and leaves the version created in
// obj's resourceVersion. An object of that name that the private cache did not show is
// someone else's (NameInUse), or this JWKSConfig's and not cached yet: then the set is
// planned again from it.
func (r *Reconciler) create(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, obj client.Object) error {
	created := obj.DeepCopyObject().(client.Object)
	err := r.Client.Create(ctx, created, client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		if _, err := r.claim(ctx, cfg, obj); err != nil {
			return err
		}
		return fmt.Errorf("%s %q exists and is not cached yet: planning the set again from it", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
	if err != nil {
		return status.WriteFailed("create", obj, err)
	}
	obj.SetResourceVersion(created.GetResourceVersion())
	r.Metrics.countWrite(obj.GetObjectKind().GroupVersionKind().Kind)
	return nil
}

// ownsDocument says whether this controller still owns the set in cm, with its value.
func (r *Reconciler) ownsDocument(cm *corev1.ConfigMap) bool {
	owned, err := apply.Owned(cm, FieldOwner)
	if err != nil {
		return false
	}
	doc, ok := owned.(*corev1ac.ConfigMapApplyConfiguration).Data[jwkset.DocumentKey]
	return ok && doc == cm.Data[jwkset.DocumentKey]
}

// currentKey reads the Secret and parses tls.crt, reusing the last parse when the bytes
// have not changed. While the Secret watch (metadata only) shows the Secret the last key
// was read from at the same resourceVersion, that key is taken without reading the Secret
// again: every change of the Secret brings the JWKSConfig back through that watch, and the
// reconcile it starts sees the new resourceVersion.
func (r *Reconciler) currentKey(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (jwkset.Key, error) {
	ref := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Spec.CertificateSecret}
	id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	if v, ok := r.parsed.Load(id); ok {
		if watched, ok := r.watchedSecret(ctx, ref, cfg.Spec.Algorithm); ok && watched == v.(parsedCert).secret {
			return unexpired(v.(parsedCert).key, ref.Name, now)
		}
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return jwkset.Key{}, status.Waiting(jwksv1alpha1.ReasonSecretNotFound, "Secret %q does not exist; waiting for it", ref.Name).Warn()
		}
		return jwkset.Key{}, fmt.Errorf("getting Secret %s: %w", ref.Name, err)
	}
	crt, ok := secret.Data[corev1.TLSCertKey]
	if !ok {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonMissingCertificate, Message: fmt.Sprintf("Secret %q has no %s", ref.Name, corev1.TLSCertKey)}
	}
	if len(crt) > jwkset.MaxCertificateBytes {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonCertificateTooLarge, Message: fmt.Sprintf("Secret %q: %s is %d bytes, more than the %d a certificate chain may have here", ref.Name, corev1.TLSCertKey, len(crt), jwkset.MaxCertificateBytes)}
	}
	version := secretVersion{name: ref.Name, algorithm: cfg.Spec.Algorithm, uid: secret.UID, resourceVersion: secret.ResourceVersion}
	fp := sha256.Sum256(append([]byte(cfg.Spec.Algorithm+"\x00"), crt...))
	if v, ok := r.parsed.Load(id); ok && v.(parsedCert).fingerprint == fp {
		r.parsed.Store(id, parsedCert{fingerprint: fp, key: v.(parsedCert).key, secret: version})
		return unexpired(v.(parsedCert).key, ref.Name, now)
	}
	key, err := jwkset.ParseChain(crt, cfg.Spec.Algorithm, now)
	if err != nil {
		var ie *jwkset.InputError
		if errors.As(err, &ie) {
			ie.Message = fmt.Sprintf("Secret %q: %s", ref.Name, ie.Message)
		}
		return jwkset.Key{}, err
	}
	r.parsed.Store(id, parsedCert{fingerprint: fp, key: key, secret: version})
	return key, nil
}

// unexpired is key, or CertificateExpired once its certificate has expired.
func unexpired(key jwkset.Key, secret string, now time.Time) (jwkset.Key, error) {
	if now.After(key.NotAfter) {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonCertificateExpired, Message: fmt.Sprintf("the certificate in Secret %q expired at %s", secret, key.NotAfter.UTC().Format(time.RFC3339))}
	}
	return key, nil
}

// watchedSecret is the version of Secret ref the manager's Secret watch (metadata only:
// no key in memory) holds; false when it holds none or cannot say.
func (r *Reconciler) watchedSecret(ctx context.Context, ref types.NamespacedName, algorithm string) (secretVersion, bool) {
	if r.SecretMetadata == nil {
		return secretVersion{}, false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.SecretMetadata.Get(ctx, ref, obj); err != nil {
		return secretVersion{}, false
	}
	return secretVersion{name: ref.Name, algorithm: algorithm, uid: obj.UID, resourceVersion: obj.ResourceVersion}, true
}

// restorePublished reads the previous set back. A document that does not parse is not
// overwritten: it may hold keys that tokens in flight still need.
func restorePublished(cm *corev1.ConfigMap) ([]jwkset.PublishedKey, error) {
	if cm == nil || cm.Data[jwkset.DocumentKey] == "" {
		return nil, nil
	}
	retirements, err := jwkset.DecodeRetirements(cm.Annotations[RetirementsAnnotation])
	if err != nil {
		// Losing retirement times only keeps old keys longer (they count as retired now).
		retirements = nil
	}
	keys, err := jwkset.Restore([]byte(cm.Data[jwkset.DocumentKey]), retirements)
	if err != nil {
		var ie *jwkset.InputError
		if errors.As(err, &ie) {
			ie.Message = fmt.Sprintf("ConfigMap %q: %s; fix or delete it, it is left untouched", cm.Name, ie.Message)
		}
		return nil, err
	}
	return keys, nil
}

// reconcileNginx applies (or, when disabled, removes) the nginx ConfigMap, Deployment
// and Service, and reverts what others changed in the fields it owns.
func (r *Reconciler) reconcileNginx(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) error {
	objs := []client.Object{desiredNginxConfigMap(cfg), desiredDeployment(cfg, r.NginxImage), desiredService(cfg)}
	if !nginxEnabled(cfg) {
		return r.deleteOwned(ctx, r.Owned, cfg, objs...)
	}
	for i, obj := range objs {
		current, err := r.claim(ctx, cfg, obj)
		if err != nil {
			return err
		}
		if current != nil && !r.drifted(current, obj) {
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
	if !Finalizer.Held(cfg) {
		return nil
	}
	objs := []client.Object{desiredDeployment(cfg, r.NginxImage), desiredService(cfg), desiredNginxConfigMap(cfg)}
	if cfg.Spec.CleanupOnDelete {
		set, _ := desiredJWKSConfigMap(cfg, nil, "") // no document: cannot fail
		objs = append(objs, set)
	}
	if err := r.deleteOwned(ctx, r.APIReader, cfg, objs...); err != nil {
		return err
	}
	if err := r.releaseIssuers(ctx, cfg, "", r.Clock.Now()); err != nil {
		return err
	}
	if err := Finalizer.Release(ctx, r.Client, cfg); err != nil {
		return err
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

// apply server-side applies obj with the controller's field owner (obj's resourceVersion,
// when set, is a precondition), and leaves the version written in obj's resourceVersion.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	u, err := apply.Configuration(r.Client, obj)
	if err != nil {
		return err
	}
	u.SetResourceVersion(obj.GetResourceVersion()) // a precondition when set
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return status.WriteFailed("apply", u, err)
	}
	obj.SetResourceVersion(u.GetResourceVersion())
	r.Metrics.countWrite(u.GetKind())
	return nil
}

// drifted says whether applying desired would change current: a field this controller
// set differs, was changed or removed by someone else (the field then belongs to them,
// as server-side apply records it), or is not set yet.
func (r *Reconciler) drifted(current, desired client.Object) bool {
	drifted, err := apply.Drifted(r.Client, current, desired, FieldOwner)
	return err != nil || drifted
}

func hashOf(v any) string {
	raw, _ := json.Marshal(v) // maps marshal with sorted keys: stable
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
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

func ptrTo[T any](v T) *T { return &v }
