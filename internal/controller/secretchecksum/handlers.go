package secretchecksum

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/handlers"
)

// onSecret keeps the ID sets current from Secret events; the PemSHA was computed (only
// for changed data) by the cache transform.
func (r *Reconciler) onSecret(old, cur *corev1.Secret, q handlers.Queue) {
	if cur == nil {
		r.inputs.forget(old.UID)
		r.record(checksum.TrackSecrets, old, "", nil, q)
		return
	}
	id, err := r.inputs.secretID(cur)
	r.record(checksum.TrackSecrets, cur, id, err, q)
}

// record puts one object's ID into (or takes it out of) every publication it counts in,
// and schedules those that changed. id == "" with err == nil means the object is gone.
func (r *Reconciler) record(track checksum.Track, obj client.Object, id string, err error, q handlers.Queue) {
	for _, p := range r.publicationsOf(track, obj.GetNamespace()) {
		key := obj.GetName()
		if p.kind == ScopeCluster {
			key = obj.GetNamespace() + "/" + key
		}
		set := r.set(p)
		var changed bool
		if id == "" {
			changed = set.Remove(key)
		} else {
			changed = set.Put(key, id)
		}
		if changed {
			q.AddAfter(p.request(), r.Debounce.Touch(p.String()))
		}
	}
	r.reports.observe(track, obj, err, q)
}

// onPublished brings a publication back when its objects change (someone deleted ours,
// a leftover needs cleaning, or it belongs to a scope no longer published).
func onPublished[T client.Object](track checksum.Track) func(old, cur T, q handlers.Queue) {
	return func(old, cur T, q handlers.Queue) {
		var obj client.Object = cur
		if isNil(cur) {
			obj = old
		}
		if obj.GetLabels()[ManagedByLabel] != managedByValue {
			return
		}
		q.Add(publication{track, kindOf(obj), obj.GetNamespace()}.request())
	}
}
