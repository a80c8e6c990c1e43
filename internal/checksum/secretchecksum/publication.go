package secretchecksum

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
)

// generateName is the name prefix of a track's published objects, as Tengine-Ingress's own.
func generateName(track checksum.Track) string {
	if track == checksum.TrackIngresses {
		return "ingress-"
	}
	return "secret-"
}

// publication is one checksum this controller maintains: a track of a scope kind, in the
// namespace it is published in.
type publication struct {
	track     checksum.Track
	kind      ScopeKind
	namespace string
}

func (p publication) String() string {
	return string(p.track) + "/" + string(p.kind) + "/" + p.namespace
}

// request is p as a work item; its name is "<track>.<kind>", never an object's name.
func (p publication) request() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.namespace, Name: string(p.track) + "." + string(p.kind)}}
}

func publicationOf(req reconcile.Request) (publication, bool) {
	track, kind, _ := strings.Cut(req.Name, ".")
	p := publication{track: checksum.Track(track), kind: ScopeKind(kind), namespace: req.Namespace}
	validTrack := p.track == checksum.TrackSecrets || p.track == checksum.TrackIngresses
	validKind := p.kind == ScopeCluster || p.kind == ScopeNamespace
	return p, validTrack && validKind
}

// publicationsOf are the publications an object of namespace ns counts in.
func (r *Reconciler) publicationsOf(track checksum.Track, ns string) []publication {
	var out []publication
	if r.opts.publishes(ScopeCluster) {
		out = append(out, publication{track, ScopeCluster, r.opts.PublishNamespace})
	}
	if r.opts.publishes(ScopeNamespace) {
		out = append(out, publication{track, ScopeNamespace, ns})
	}
	return out
}

// publishedObject is a checksum object this controller made.
type publishedObject struct {
	obj      client.Object
	checksum string
	created  metav1.Time
}

// listPublished returns this controller's objects of p, oldest first.
func (r *Reconciler) listPublished(ctx context.Context, p publication) ([]publishedObject, error) {
	var out []publishedObject
	opts := []client.ListOption{client.InNamespace(p.namespace), client.MatchingLabelsSelector{Selector: ownSelector(p.kind)}}
	if p.track == checksum.TrackSecrets {
		list := &tenginev1.SecretCheckSumList{}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, publishedObject{&list.Items[i], list.Items[i].Spec.Checksum, list.Items[i].CreationTimestamp})
		}
	} else {
		list := &tenginev1.IngressCheckSumList{}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, publishedObject{&list.Items[i], list.Items[i].Spec.Checksum, list.Items[i].CreationTimestamp})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(&out[j].created) {
			return out[i].created.Before(&out[j].created)
		}
		return out[i].obj.GetName() < out[j].obj.GetName()
	})
	return out, nil
}

// ownSelector selects this controller's objects of a scope kind; unlabelled ones are
// per-namespace publications of older versions.
func ownSelector(kind ScopeKind) labels.Selector {
	ours, _ := labels.NewRequirement(ManagedByLabel, selection.Equals, []string{managedByValue})
	op := selection.Equals
	if kind == ScopeNamespace {
		op = selection.NotEquals
	}
	ofKind, _ := labels.NewRequirement(ScopeKindLabel, op, []string{string(ScopeCluster)})
	return labels.NewSelector().Add(*ours, *ofKind)
}

// kindOf is the scope kind of a published object.
func kindOf(obj client.Object) ScopeKind {
	if obj.GetLabels()[ScopeKindLabel] == string(ScopeCluster) {
		return ScopeCluster
	}
	return ScopeNamespace
}

// publish creates p's new object. IDs that would make it larger than etcd stores are
// left out of spec.ids, loudly: the checksum alone is what a data plane compares, the
// IDs only explain a mismatch.
func (r *Reconciler) publish(ctx context.Context, p publication, ids []string, sum string) (client.Object, error) {
	omitted := ""
	if size := objectBytes(ids); size > r.opts.MaxObjectBytes {
		omitted = fmt.Sprintf("%d IDs take about %d bytes, more than --secret-checksum-max-object-bytes=%d", len(ids), size, r.opts.MaxObjectBytes)
	}
	obj, err := r.create(ctx, p, ids, sum, omitted)
	if err != nil && omitted == "" && tooLarge(err) {
		// The API server's (or etcd's) limit is below ours: say so and publish the checksum.
		omitted = fmt.Sprintf("%d IDs: the API server refused the object as too large (%v); lower --secret-checksum-max-object-bytes=%d", len(ids), err, r.opts.MaxObjectBytes)
		obj, err = r.create(ctx, p, ids, sum, omitted)
	}
	if err != nil {
		return nil, fmt.Errorf("publishing the %s checksum of the %s scope in %s: %w", p.track, p.kind, p.namespace, err)
	}
	r.reportOmitted(ctx, p, obj, omitted)
	return obj, nil
}

func (r *Reconciler) create(ctx context.Context, p publication, ids []string, sum, omitted string) (client.Object, error) {
	meta := metav1.ObjectMeta{
		Namespace: p.namespace, GenerateName: generateName(p.track),
		Labels:      map[string]string{ManagedByLabel: managedByValue, ScopeKindLabel: string(p.kind)},
		Annotations: map[string]string{ScopeAnnotation: r.scope(p).String()},
	}
	if omitted != "" {
		meta.Annotations[checksum.IDsOmittedAnnotation] = omitted
		ids = nil
	}
	now := metav1.NewTime(r.Clock.Now().UTC().Truncate(time.Second))
	var obj client.Object
	if p.track == checksum.TrackSecrets {
		obj = &tenginev1.SecretCheckSum{ObjectMeta: meta, Spec: tenginev1.SecretCheckSumSpec{Checksum: sum, IDs: ids, Timestamp: now}}
	} else {
		obj = &tenginev1.IngressCheckSum{ObjectMeta: meta, Spec: tenginev1.IngressCheckSumSpec{Checksum: sum, IDs: ids, Timestamp: now}}
	}
	return obj, r.Client.Create(ctx, obj)
}

// reportOmitted keeps the metric current and, when IDs were left out, says so in an
// event on the object and in the log, with the count and the limit.
func (r *Reconciler) reportOmitted(ctx context.Context, p publication, obj client.Object, omitted string) {
	gauge := r.Metrics.idsOmitted.WithLabelValues(string(p.track), string(p.kind), p.namespace)
	if omitted == "" {
		gauge.Set(0)
		return
	}
	gauge.Set(1)
	log.FromContext(ctx).Info("published a checksum without its IDs: data planes can still compare the checksum but cannot say which IDs differ",
		"track", p.track, "scope", p.kind, "namespace", p.namespace, "object", obj.GetName(), "why", omitted)
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonIDsOmitted, "Publish", "spec.ids left empty: %s", omitted)
}

// objectBytes estimates the JSON size of a published object: each ID quoted with a
// comma, plus metadata (names, labels, annotations, managed fields) well under 2 KiB.
func objectBytes(ids []string) int {
	const overhead = 2048
	n := overhead
	for _, id := range ids {
		n += len(id) + 3
	}
	return n
}

// tooLarge recognizes the API server's 413 and etcd's "request is too large".
func tooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(err.Error(), "request is too large")
}

// deleteOlder deletes all but the newest keep objects.
func (r *Reconciler) deleteOlder(ctx context.Context, published []publishedObject, keep int) error {
	for i := 0; i < len(published)-keep; i++ {
		obj := published[i].obj
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting superseded %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
