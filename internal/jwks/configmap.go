package jwks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// The JWKS ConfigMap: readPublished reads the set published before, writeSet writes the
// next one, removeRenamed deletes the one left under an old name.

// readPublished reads the JWKS ConfigMap named by the spec (nil if it does not exist
// yet) and the set published before: from the same ConfigMap, or, right after
// spec.configMapName changed, from the ConfigMap this JWKSConfig published in before, so
// that the set moves with its retired keys. A ConfigMap of that name that is not this
// JWKSConfig's is never read or written (NameInUse).
//
// When the set is created with a plain create (createsFirst), a ConfigMap the private
// cache does not hold is taken to be absent without asking the API server: the create
// finds out if it is not (see create).
func (r *Reconciler) readPublished(ctx context.Context, s *scope) (ctrl.Result, error) {
	cfg := s.cfg
	obj, err := r.claimAsking(ctx, cfg, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: jwkset.ConfigMapName(cfg)}}, !createsFirst(cfg))
	if err != nil {
		return ctrl.Result{}, err
	}
	source := (*corev1.ConfigMap)(nil)
	if obj != nil {
		s.current = obj.(*corev1.ConfigMap)
		source = s.current
	} else {
		renamed, err := r.renamedConfigMaps(ctx, cfg)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(renamed) > 0 {
			source = &renamed[0]
		}
	}
	s.previous, err = r.restore(cfg, source)
	return ctrl.Result{}, err
}

// renamedConfigMaps are the JWKS ConfigMaps this JWKSConfig made under names it no
// longer uses (spec.configMapName changed), by name.
func (r *Reconciler) renamedConfigMaps(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) ([]corev1.ConfigMap, error) {
	list := &corev1.ConfigMapList{}
	var mine client.ListOption = client.MatchingLabels{jwksv1alpha1.OwnerLabel: cfg.Name}
	if r.OwnedIndexed {
		mine = client.MatchingFields{ownerIndex: cfg.Name}
	}
	if err := r.Owned.List(ctx, list, client.InNamespace(cfg.Namespace), mine); err != nil {
		return nil, fmt.Errorf("listing the ConfigMaps of JWKSConfig %s: %w", cfg.Name, err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		_, isSet := cm.Annotations[jwksv1alpha1.RetirementsAnnotation]
		if isSet && cm.Name != jwkset.ConfigMapName(cfg) && cm.Name != jwkset.NginxConfigMapName(cfg) {
			out = append(out, cm)
		}
	}
	slices.SortFunc(out, func(a, b corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
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

// restorePublished reads the previous set back. A document that does not parse is not
// overwritten: it may hold keys that tokens in flight still need.
func restorePublished(cm *corev1.ConfigMap) ([]jwkset.PublishedKey, error) {
	if cm == nil || cm.Data[jwkset.DocumentKey] == "" {
		return nil, nil
	}
	retirements, err := jwkset.DecodeRetirements(cm.Annotations[jwksv1alpha1.RetirementsAnnotation])
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

// ownsDocument says whether this controller still owns the set in cm, with its value.
func (r *Reconciler) ownsDocument(cm *corev1.ConfigMap) bool {
	owned, err := apply.Owned(cm, FieldOwner)
	if err != nil {
		return false
	}
	doc, ok := owned.(*corev1ac.ConfigMapApplyConfiguration).Data[jwkset.DocumentKey]
	return ok && doc == cm.Data[jwkset.DocumentKey]
}

// createsFirst says whether the JWKS ConfigMap is made with a plain create, one request
// where asking whether the name is free and an apply that creates would cost two (and the
// create costs the API server about half of that apply). Not with an issuer: its
// discovery document is a key of the ConfigMap only while spec.issuer is set, and a key a
// create wrote would stay after it goes (server-side apply removes only what it applied).
// Later changes are applied; until the first, the create's fields count as the
// controller's own (apply.Owned).
func createsFirst(cfg *jwksv1alpha1.JWKSConfig) bool { return cfg.Spec.Issuer == "" }

// writeSet writes the planned set to the JWKS ConfigMap when it differs from what is
// there: at once when the set is created or put back after someone else changed it,
// otherwise no sooner than the update interval after the last update (UpdateThrottled,
// the previous set served until then). It waits for its own cache to show the write, tells
// what changed (events), and makes nginx's pods resync their copy.
func (r *Reconciler) writeSet(ctx context.Context, s *scope) (ctrl.Result, error) {
	cfg, cm := s.cfg, s.current
	desired, err := desiredJWKSConfigMap(cfg, s.doc, jwkset.EncodeRetirements(s.next))
	if err != nil {
		return ctrl.Result{}, err
	}
	if cm != nil {
		// The set is planned from what was read, maybe from a cache that has not seen our
		// last write yet: the API server refuses the apply (conflict, retried) rather than
		// let a stale plan drop a key.
		desired.ResourceVersion = cm.ResourceVersion
	}
	if cm != nil && !r.drifted(cm, desired) {
		return ctrl.Result{}, nil
	}
	// Creating a set, or putting back one someone else changed, is never throttled:
	// the interval spaces out this controller's own changes, not repairs.
	repair := cm != nil && apply.WrittenBy(cm, FieldOwner) && !r.ownsDocument(cm)
	if wait := r.Throttle.Wait(s.id, s.now, cm == nil || repair); wait > 0 {
		log.FromContext(ctx).V(1).Info("ConfigMap update throttled", "wait", wait)
		return ctrl.Result{}, status.Waiting(jwksv1alpha1.ReasonUpdateThrottled,
			"the set changed within %v of its last update; the change is published at %s, the previous set is served until then",
			r.Throttle.Interval, s.now.Add(wait).UTC().Format(time.RFC3339)).After(wait).KeepReady()
	}
	echo, err := r.writeOwn(s.id, desired, func() error {
		if cm == nil && createsFirst(cfg) {
			return r.create(ctx, cfg, desired)
		}
		return r.apply(ctx, desired)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	r.awaitOwnedCache(ctx, s.id, desired, s.doc, echo)
	if cm != nil && !repair { // creating a set is not an update: it does not start a window
		r.Throttle.Wrote(s.id, s.now)
	}
	if repair {
		r.Recorder.Eventf(cfg, cm, corev1.EventTypeWarning, jwksv1alpha1.ReasonDriftReverted, "Publish",
			"ConfigMap %q was changed by someone else; the published set (%d keys) was put back", cm.Name, len(s.next))
	}
	r.announce(cfg, s.previous, s.next)
	cfg.Status.LastUpdateTime = &metav1.Time{Time: s.now}
	if jwkset.NginxEnabled(cfg) {
		if err := r.refreshPods(ctx, cfg, desired); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

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
	apiWrites.WithLabelValues(obj.GetObjectKind().GroupVersionKind().Kind).Inc()
	return nil
}

// writeOwn runs write, which writes cm (the JWKS ConfigMap of the JWKSConfig id) and
// leaves the version written in cm's resourceVersion, and records it (ownWrites): the
// echo of the write, however early it comes, brings nothing back. echo is closed once the
// private cache holds the version written.
func (r *Reconciler) writeOwn(id types.NamespacedName, cm client.Object, write func() error) (echo <-chan struct{}, err error) {
	r.ownWrites.writing(id)
	written := false
	defer func() {
		if written {
			echo = r.ownWrites.wrote(id, cm)
		} else {
			r.ownWrites.failed(id) // also when write panics: nothing stays held
		}
	}()
	if err := write(); err != nil {
		return nil, err
	}
	written = true
	return nil, nil
}

// ownedCacheWait is the longest a reconcile waits for its own cache to show the set it
// has just written.
const ownedCacheWait = time.Second

// awaitOwnedCache waits, at most ownedCacheWait, until the private cache (which
// trustplane's server answers from, and checkServed reads) holds the document just
// written to cm. It looks once, then waits for the write's echo (echo closed), which the
// informer hands on only after its cache holds that version, and looks again if none came
// in time. Nothing is polled: 32 workers polling the cache every few milliseconds took
// CPU from the API server whose watch they wait for.
//
// Without the wait most reconciles of a new set would find the cache a moment behind,
// store a ServerSyncing status, and come back for a second status write once the watch
// brought the ConfigMap: one write more per set for nothing new. After the wait it is as
// before: ServerSyncing, and the watch brings the JWKSConfig back.
//
// The watch event of the version written (cm's resourceVersion, as create and apply leave
// it) is the echo of this reconcile's own write, and is expected (ownWrites, writeOwn)
// from before the write is sent: a reconcile that has seen its write in the cache has
// acted on all the echo would show. One that gives up waiting takes the expectation back,
// so the echo still brings the JWKSConfig back; if the echo came in between (or before
// the write's answer), the cache already holds the version, and checkServed, which reads
// it next, sees it.
func (r *Reconciler) awaitOwnedCache(ctx context.Context, id types.NamespacedName, cm client.Object, doc []byte, echo <-chan struct{}) {
	if r.ownedCacheHolds(ctx, cm, doc) {
		return
	}
	timeout := time.NewTimer(ownedCacheWait)
	defer timeout.Stop()
	select {
	case <-echo:
		return
	case <-timeout.C:
	case <-ctx.Done():
	}
	if !r.ownedCacheHolds(ctx, cm, doc) {
		r.ownWrites.unexpect(id, cm)
	}
}

// ownedCacheHolds says whether the private cache holds doc in cm.
func (r *Reconciler) ownedCacheHolds(ctx context.Context, cm client.Object, doc []byte) bool {
	cached := &corev1.ConfigMap{}
	return r.Owned.Get(ctx, client.ObjectKeyFromObject(cm), cached) == nil && cached.Data[jwkset.DocumentKey] == string(doc)
}

// announce emits events for what changed in the set.
func (r *Reconciler) announce(cfg *jwksv1alpha1.JWKSConfig, previous, next []jwkset.PublishedKey) {
	nextKids := map[string]bool{}
	for _, k := range next {
		nextKids[k.KeyID()] = true
	}
	current := next[0].KeyID()
	// A first publication is told by the Ready condition (reason Published, the kid in its
	// message) the status write brings anyway: an event too would be one more API request
	// per JWKSConfig for nothing new.
	switch {
	case len(previous) == 0:
	case previous[0].KeyID() != current:
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonKeyRotated, "Rotate", "Current key is now %s (was %s)", current, previous[0].KeyID())
	default:
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonUpdated, "Publish", "Updated key %s", current)
	}
	var removed []string
	for _, k := range previous {
		if !nextKids[k.KeyID()] {
			removed = append(removed, k.KeyID())
		}
	}
	if len(removed) > 0 {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonKeyRemoved, "Remove", "Removed retired key(s) %s", strings.Join(removed, ", "))
	}
	if cfg.Spec.Issuer != "" && next[0].JWK.Algorithm == "EdDSA" {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, jwksv1alpha1.ReasonAlgorithmUnsupported, "Publish",
			"Key %s is published for EdDSA, which kube-apiserver's JWT authenticator cannot verify (it takes RS*, ES* and PS*): use an RSA or ECDSA key for an issuer kube-apiserver trusts", current)
	}
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
		if pod.Annotations[jwksv1alpha1.PodContentAnnotation] == content || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, jwksv1alpha1.PodContentAnnotation, content))
		if err := r.Client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return status.WriteFailed("patch", pod, err)
		}
	}
	return nil
}

// removeRenamed deletes the JWKS ConfigMaps left under an old name once the set is
// published under the new one.
func (r *Reconciler) removeRenamed(ctx context.Context, s *scope) (ctrl.Result, error) {
	cfg := s.cfg
	renamed, err := r.renamedConfigMaps(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range renamed {
		old := &renamed[i]
		err := r.Client.Delete(ctx, old, client.Preconditions{UID: ptr.To(old.UID)})
		if apierrors.IsNotFound(err) {
			continue // deleted by an earlier reconcile; the cache had not seen it go
		}
		if err != nil {
			return ctrl.Result{}, status.WriteFailed("delete", old, err)
		}
		r.Recorder.Eventf(cfg, old, corev1.EventTypeNormal, jwksv1alpha1.ReasonConfigMapMoved, "Delete", "The set moved to ConfigMap %q; deleted %q", jwkset.ConfigMapName(cfg), old.Name)
	}
	return ctrl.Result{}, nil
}

// ownWrites remembers, per JWKSConfig, the version of its JWKS ConfigMap that its
// reconcile has just written (awaitOwnedCache). The watch event of that version is the
// echo of the write: the reconcile that made it waits until its cache shows the version,
// so it has acted on everything the echo shows, and a second reconcile would find nothing
// to do (one reconcile per published set, not two). Any other version, a deletion, or
// an echo the reconcile stopped waiting for still brings the JWKSConfig back.
//
// The echo may come before the write's answer does (the API server sends both at once;
// which the manager handles first is chance: a quarter of the sets of a burst, when the
// machine is busy): while a write is in flight (writing), the events of the JWKSConfig's
// ConfigMaps are held, not dropped, until its answer names the version written. Then the
// echo among them is dropped, and every other one is passed on as it would have been;
// a write that fails passes them all on.
type ownWrites struct {
	mu  sync.Mutex
	ids map[types.NamespacedName]*writeState // by JWKSConfig
}

// writeState is one JWKSConfig's: the version whose echo is expected, and the events held
// while a write is in flight.
type writeState struct {
	expected ownWrite      // zero: none
	echoed   chan struct{} // closed when the echo of expected comes
	writing  bool
	held     []heldEvent
}

// heldEvent is an event that came while a write was in flight, and how to pass it on.
type heldEvent struct {
	version ownWrite
	pass    func()
}

// ownWrite is one ConfigMap version a reconcile wrote.
type ownWrite struct {
	name, resourceVersion string
}

func writeOf(cm client.Object) ownWrite {
	return ownWrite{name: cm.GetName(), resourceVersion: cm.GetResourceVersion()}
}

// state is id's, made when absent; w.mu is held.
func (w *ownWrites) state(id types.NamespacedName) *writeState {
	if w.ids == nil {
		w.ids = map[types.NamespacedName]*writeState{}
	}
	st, ok := w.ids[id]
	if !ok {
		st = &writeState{}
		w.ids[id] = st
	}
	return st
}

// writing records that the reconcile of id is about to write its JWKS ConfigMap: events
// of its ConfigMaps are held until wrote or failed.
func (w *ownWrites) writing(id types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state(id).writing = true
}

// wrote records that the reconcile of id wrote cm, at cm's resourceVersion: the echo of
// that version, held already or still to come, is dropped once; the other events held
// meanwhile are passed on. The channel it returns is closed when the echo has come (at
// once if it came before the answer).
func (w *ownWrites) wrote(id types.NamespacedName, cm client.Object) <-chan struct{} {
	return w.settle(id, writeOf(cm), true)
}

// failed records that the write of id's reconcile failed: the events held meanwhile are
// passed on.
func (w *ownWrites) failed(id types.NamespacedName) {
	w.settle(id, ownWrite{}, false)
}

// closedChannel is an echo that has come already.
var closedChannel = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (w *ownWrites) settle(id types.NamespacedName, written ownWrite, ok bool) <-chan struct{} {
	w.mu.Lock()
	st := w.state(id)
	held := st.held
	st.writing, st.held = false, nil
	echoed := false
	var pass []func()
	for _, e := range held {
		if ok && !echoed && e.version == written {
			echoed = true
			continue
		}
		pass = append(pass, e.pass)
	}
	echo := closedChannel
	if ok && !echoed {
		st.expected, st.echoed = written, make(chan struct{})
		echo = st.echoed
	}
	w.tidy(id, st)
	w.mu.Unlock()
	for _, p := range pass {
		p()
	}
	return echo
}

// unexpect takes wrote's expectation back, unless the echo has come already.
func (w *ownWrites) unexpect(id types.NamespacedName, cm client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.ids[id]; ok && st.expected == writeOf(cm) {
		st.expected, st.echoed = ownWrite{}, nil
		w.tidy(id, st)
	}
}

// tidy forgets id's state once it holds nothing; w.mu is held.
func (w *ownWrites) tidy(id types.NamespacedName, st *writeState) {
	if !st.writing && len(st.held) == 0 && st.expected == (ownWrite{}) {
		delete(w.ids, id)
	}
}

// admit says whether an event of cm passes on now. The echo of the version expected is
// dropped (and forgotten: an echo is dropped once); while a write is in flight, the event
// is held, and pass is called if it turns out not to be the echo.
func (w *ownWrites) admit(cm client.Object, pass func()) bool {
	id := types.NamespacedName{Namespace: cm.GetNamespace(), Name: cm.GetLabels()[jwksv1alpha1.OwnerLabel]}
	version := writeOf(cm)
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.ids[id]
	switch {
	case !ok:
		return true
	case st.expected == version:
		close(st.echoed)
		st.expected, st.echoed = ownWrite{}, nil
		w.tidy(id, st)
		return false
	case st.writing:
		st.held = append(st.held, heldEvent{version: version, pass: pass})
		return false
	}
	return true
}

func (w *ownWrites) forget(id types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ids, id)
}

// notAnEcho passes every event of a JWKS ConfigMap to next but the echo of the
// controller's own write (ownWrites); deletions always pass.
func (w *ownWrites) notAnEcho(next handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if w.admit(e.Object, func() { next.Create(ctx, e, q) }) {
				next.Create(ctx, e, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if w.admit(e.ObjectNew, func() { next.Update(ctx, e, q) }) {
				next.Update(ctx, e, q)
			}
		},
		DeleteFunc:  next.Delete,
		GenericFunc: next.Generic,
	}
}
