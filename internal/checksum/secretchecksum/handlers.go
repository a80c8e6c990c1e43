package secretchecksum

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// onSecret keeps the ID sets current from Secret events; the PemSHA was computed (only
// for changed data) by the cache transform.
func (r *Reconciler) onSecret(old, cur *corev1.Secret, q handlers.Queue) {
	if cur == nil {
		r.inputs.forget(old.UID)
		r.record(checksum.TrackSecrets, old, "", nil, q)
		return
	}
	if old != nil && r.inputs.versioned(old) && !r.inputs.versioned(cur) {
		r.versionRemoved(cur)
	}
	id, err := r.inputs.secretID(cur)
	r.record(checksum.TrackSecrets, cur, id, err, q)
}

// versionRemoved reports a Secret that had the version annotation and lost it: counted
// until then, it leaves the checksum now, and Tengine-Ingress stops serving it. Said
// loudly, because it is usually a careless edit, not a decision.
func (r *Reconciler) versionRemoved(s *corev1.Secret) {
	r.Metrics.versionsRemoved.WithLabelValues(s.Namespace).Inc()
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonVersionRemoved, "Count",
			"the Secret lost its annotation %s: it is no longer counted in the checksum and Tengine-Ingress drops it; trustplane's data plane keeps its last verified files until %s=true or the Secret's deletion confirms it. Put the annotation back (with a higher version) if this was not meant (docs/checksum.md)",
			r.opts.VersionAnnotation, dataplane.RemoveUnversionedAnnotation)
	}
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
