package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
)

// maxNoteLength is the longest note the events.k8s.io API accepts.
const maxNoteLength = 1024

// eventAction is the action of the Warning events Record emits.
const eventAction = "Reconcile"

// Patcher records a reconcile's outcome on the object it reconciles and writes the status
// back once, if it changed since the object was read.
type Patcher struct {
	obj    conditions.Object // changed in place by the reconcile
	before conditions.Object // as read (or as last patched)
}

// NewPatcher snapshots obj as read at the start of a reconcile.
func NewPatcher(obj conditions.Object) *Patcher {
	return &Patcher{obj: obj, before: obj.DeepCopyObject().(conditions.Object)}
}

// Finish records err (nil: the reconcile marked its own outcome, e.g. with MarkReady),
// sends at most one status patch, sets the condition gauges (Metrics), and returns what
// controller-runtime should do: result on success; for a Waiting error no error
// (RequeueAfter when time is awaited); a terminal error for a Stalled one; the error
// itself, for a backoff retry, otherwise.
func (p *Patcher) Finish(ctx context.Context, c client.Client, rec events.EventRecorder, result ctrl.Result, err error) (ctrl.Result, error) {
	p.Record(rec, err)
	perr := p.Patch(ctx, c)
	// The gauges (trustplane_object_ready, ...) follow what the reconcile concluded.
	observe(p.obj)
	if perr != nil {
		// Not terminal even after a Stalled outcome: the status must be written.
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return Result(result, err)
}

// Record turns err into the object's conditions (see the Mark functions) and emits a
// Warning event when a failure is new: a stalled or refused outcome, or a Waiting or
// Transient one that asked for it with Warn, whose condition was not there as read. A
// failure retried with the same reason and message emits nothing more.
func (p *Patcher) Record(rec events.EventRecorder, err error) {
	if err == nil {
		return
	}
	e := outcomeOf(err)
	message := err.Error()
	carrier := conditions.Reconciling
	switch e.kind {
	case waiting:
		if e.keepReady {
			MarkPending(p.obj, e.reason, message)
		} else {
			MarkWaiting(p.obj, e.reason, message)
		}
	case retrying:
		MarkRetrying(p.obj, e.reason, message)
	case stalled, refused:
		MarkStalled(p.obj, e.reason, message)
		carrier = conditions.Stalled
	}
	warn := e.warn || e.kind == stalled || e.kind == refused
	if warn && rec != nil && p.changed(carrier) {
		rec.Eventf(p.obj, nil, corev1.EventTypeWarning, e.reason, eventAction, "%s", Truncate(message, maxNoteLength))
	}
}

// changed says whether the condition differs from the one the object was read with.
func (p *Patcher) changed(conditionType string) bool {
	was := meta.FindStatusCondition(p.before.GetConditions(), conditionType)
	is := meta.FindStatusCondition(p.obj.GetConditions(), conditionType)
	if was == nil || is == nil {
		return was != is
	}
	return was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message
}

// Patch writes the status when it differs from the one read (or last written): with a
// client from WithStatusUpdates (the manager's), as an update at the version read, and
// as a JSON merge patch of the status subresource when the object changed since (or with
// any other client). An object that is gone, or going with no finalizer left, is not
// written.
func (p *Patcher) Patch(ctx context.Context, c client.Client) error {
	if !p.obj.GetDeletionTimestamp().IsZero() && len(p.obj.GetFinalizers()) == 0 {
		return nil
	}
	markReconcileHandled(p.obj) // a reconcile asked for with the annotation ran
	changed, err := statusChanged(p.before, p.obj)
	if err != nil || !changed {
		return err
	}
	if u, ok := c.(*updatingClient); ok && current(p.obj) {
		answered, err := u.updateStatus(ctx, p.obj)
		switch {
		case err == nil:
			// Written at the version read: the object held is the one stored, at the
			// version written now.
			p.obj.SetResourceVersion(answered.ResourceVersion)
			p.wrote(answered)
			return nil
		case apierrors.IsNotFound(err):
			forgetWritten(KindOf(p.obj), client.ObjectKeyFromObject(p.obj))
			return nil
		case !apierrors.IsConflict(err):
			return WriteFailed("update status of", p.obj, err)
		}
		// Changed since it was read (a spec edit, a label, another writer's status): the
		// merge patch below writes what this reconcile changed, and nothing else.
	}
	patch, changed, err := statusMergePatch(p.before, p.obj)
	if err != nil || !changed {
		return err
	}
	if !equality.Semantic.DeepEqual(p.before.GetConditions(), p.obj.GetConditions()) {
		return p.patchConditionsOntoStored(ctx, c, patch)
	}
	// The answer is asked for as metadata only: nothing here reads the object as stored
	// (its spec may be newer than the one this reconcile acts on, and must not change what
	// the rest of it does), and decoding a whole custom resource, JSON, for every status
	// patch was a third of the patch's CPU in bench-jwks (and the API server's encoding of
	// it more of its own).
	answered, err := metadataOf(c, p.obj)
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, answered, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(WriteFailed("patch status of", p.obj, err))
	}
	p.wrote(answered)
	return nil
}

// patchConditionsOntoStored sends patch (statusMergePatch's) with the conditions this
// reconcile changed applied to the object's conditions as stored now, not as read. A JSON
// merge patch replaces a list whole, and the read may be older than the stored object: a
// cache that has not shown this process's last write yet. Sent as read, a condition that
// write set and this reconcile left alone went back to what the read showed (a
// JWKSConfig's RelyingParties condition, set when its key was promoted, back to
// KeyNotFetched by the reconcile that came a millisecond later). As Cluster API's patch
// helper does: the stored conditions are read from the API server, this reconcile's
// changes are applied to them by type, and the patch is sent at the version read, again
// on a conflict.
func (p *Patcher) patchConditionsOntoStored(ctx context.Context, c client.Client, patch []byte) error {
	var body struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(patch, &body); err != nil {
		return fmt.Errorf("patching the status of %s: %w", p.obj.GetName(), err)
	}
	answered, err := metadataOf(c, p.obj)
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stored := reflect.New(reflect.TypeOf(p.obj).Elem()).Interface().(conditions.Object)
		// The status subresource is read from the API server: the cache may be the stale one.
		if err := c.SubResource("status").Get(ctx, p.obj, stored); err != nil {
			return err
		}
		merged, err := json.Marshal(conditionsOnto(stored.GetConditions(), p.before.GetConditions(), p.obj.GetConditions()))
		if err != nil {
			return err
		}
		body.Status["conditions"] = merged
		send, err := json.Marshal(map[string]any{
			"metadata": map[string]string{"resourceVersion": stored.GetResourceVersion()},
			"status":   body.Status,
		})
		if err != nil {
			return err
		}
		return c.Status().Patch(ctx, answered, client.RawPatch(types.MergePatchType, send))
	})
	if err != nil {
		return client.IgnoreNotFound(WriteFailed("patch status of", p.obj, err))
	}
	p.wrote(answered)
	return nil
}

// conditionsOnto is stored with what changed from before to after applied by type, with
// apimachinery's condition helpers: a condition after holds otherwise than before is set
// (its transition time kept when the stored one has its status already), one before held
// and after does not is removed, and every other stored condition stays as it is.
func conditionsOnto(stored, before, after []metav1.Condition) []metav1.Condition {
	out := slices.Clone(stored)
	for _, b := range before {
		if meta.FindStatusCondition(after, b.Type) == nil {
			meta.RemoveStatusCondition(&out, b.Type)
		}
	}
	for _, a := range after {
		if b := meta.FindStatusCondition(before, a.Type); b == nil || !equality.Semantic.DeepEqual(*b, a) {
			meta.SetStatusCondition(&out, a)
		}
	}
	return out
}

// wrote records a status write answered with the object's metadata: the status written,
// which a later write of this reconcile is compared with, and the version written, which
// the next reconcile's update needs its read to show (current). After a merge patch the
// object held keeps the version it was read at: someone else changed the stored one, and
// a write of the object held at the newer version would undo their change.
func (p *Patcher) wrote(answered *metav1.PartialObjectMetadata) {
	p.before = p.obj.DeepCopyObject().(conditions.Object)
	written.Store(writtenKey{kind: KindOf(p.obj), id: client.ObjectKeyFromObject(p.obj)}, answered.ResourceVersion)
}

// written is, per object, the resourceVersion of the status this process last wrote to it.
var written sync.Map // writtenKey → string

type writtenKey struct {
	kind string
	id   types.NamespacedName
}

// current says whether obj was read at a version a status update can start from: the one
// this process last wrote to it, or any when it has written none. A read from a cache
// that has not shown the last write yet would be refused for the conflict and then
// patched, two requests for one, so it is merge-patched at once; so is one that someone
// else changed since (its version is not the one written).
func current(obj client.Object) bool {
	rv := obj.GetResourceVersion()
	last, wrote := written.Load(writtenKey{kind: KindOf(obj), id: client.ObjectKeyFromObject(obj)})
	return rv != "" && (!wrote || last.(string) == rv)
}

// forgetWritten drops what written holds of an object that is gone.
func forgetWritten(kind string, id types.NamespacedName) {
	written.Delete(writtenKey{kind: kind, id: id})
}

// metadataOf is obj's identity as a PartialObjectMetadata, which the client sends to the
// API server's metadata endpoint: the answer to a request made with it is the object's
// metadata alone.
func metadataOf(c client.Client, obj client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, fmt.Errorf("patching the status of %s: %w", obj.GetName(), err)
	}
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	m.SetGroupVersionKind(gvk)
	return m, nil
}

// statusChanged says whether after's status differs from before's.
func statusChanged(before, after runtime.Object) (bool, error) {
	was, err := statusOf(before)
	if err != nil {
		return false, err
	}
	is, err := statusOf(after)
	if err != nil {
		return false, err
	}
	return !equality.Semantic.DeepEqual(was, is), nil
}

// statusMergePatch is the JSON merge patch from before's status to after's, and whether
// there is anything to patch.
func statusMergePatch(before, after runtime.Object) ([]byte, bool, error) {
	was, err := statusOf(before)
	if err != nil {
		return nil, false, err
	}
	is, err := statusOf(after)
	if err != nil {
		return nil, false, err
	}
	if equality.Semantic.DeepEqual(was, is) {
		return nil, false, nil
	}
	wasJSON, err := json.Marshal(was)
	if err != nil {
		return nil, false, err
	}
	isJSON, err := json.Marshal(is)
	if err != nil {
		return nil, false, err
	}
	patch, changed, err := mergePatch(wasJSON, isJSON)
	if err != nil {
		return nil, false, fmt.Errorf("computing the status patch: %w", err)
	}
	if !changed {
		return nil, false, nil
	}
	out, err := json.Marshal(map[string]json.RawMessage{"status": patch})
	return out, err == nil, err
}

// mergePatch is the JSON merge patch (RFC 7386) from the object a to the object b, both
// as json.Marshal writes them, and whether they differ: b's members that a lacks or holds
// otherwise (an object member of both, patched in turn), and null for a's members that b
// lacks. It decodes no further than the members that differ, where a general merge-patch
// diff decodes both documents whole: that was half the allocations of a status patch.
func mergePatch(a, b []byte) (json.RawMessage, bool, error) {
	var was, is map[string]json.RawMessage
	if err := json.Unmarshal(a, &was); err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(b, &is); err != nil {
		return nil, false, err
	}
	patch := map[string]json.RawMessage{}
	for k, v := range is {
		old, had := was[k]
		switch {
		case had && bytes.Equal(old, v):
		case had && isObject(old) && isObject(v):
			sub, changed, err := mergePatch(old, v)
			if err != nil {
				return nil, false, err
			}
			if changed {
				patch[k] = sub
			}
		default:
			patch[k] = v
		}
	}
	for k := range was {
		if _, kept := is[k]; !kept {
			patch[k] = json.RawMessage("null")
		}
	}
	if len(patch) == 0 {
		return nil, false, nil
	}
	out, err := json.Marshal(patch)
	return out, err == nil, err
}

// isObject says whether a JSON value (as json.Marshal writes it) is an object.
func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// statusOf is obj's Status field, as typed: comparing and marshalling it alone is much
// cheaper than converting the whole object (managed fields and all) on every reconcile.
func statusOf(obj runtime.Object) (any, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%T is not a struct", obj)
	}
	status := v.FieldByName("Status")
	if !status.IsValid() {
		return nil, fmt.Errorf("%T has no Status field", obj)
	}
	return status.Interface(), nil
}

// Result is what controller-runtime should do after a reconcile that ended with err; see
// Finish.
func Result(result ctrl.Result, err error) (ctrl.Result, error) {
	if err == nil {
		return result, nil
	}
	switch e := outcomeOf(err); e.kind {
	case waiting:
		return ctrl.Result{RequeueAfter: e.requeueAfter}, nil
	case stalled:
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, err
}
