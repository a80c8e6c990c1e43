package dataplaneagent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// report records a verdict in metrics, and a distrust in logs and one event per
// distinct difference (IDs, never contents). It returns whether the track is trusted.
func (a *Agent) report(logger interface {
	Info(string, ...any)
}, track checksum.Track, v dataplane.Verdict, against client.Object) bool {
	localOnly, publishedOnly := mismatchIDs.WithLabelValues(string(track), "local_only"), mismatchIDs.WithLabelValues(string(track), "published_only")
	localOnly.Set(float64(len(v.LocalOnly)))
	publishedOnly.Set(float64(len(v.PublishedOnly)))
	scopeMismatch.WithLabelValues(string(track)).Set(boolGauge(v.Reason == dataplane.ScopeMismatch))
	// Last: a scrape that shows a verdict shows its details too (alerts join them).
	consistentGauge.WithLabelValues(string(track)).Set(boolGauge(v.Trusted))
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Trusted {
		a.lastMismatch[track] = ""
		return true
	}
	key, reason, note := a.describe(track, v, against)
	if key == a.lastMismatch[track] {
		return false
	}
	a.lastMismatch[track] = key
	logger.Info("objects do not agree with the control plane; keeping the last verified state",
		"track", track, "reason", v.Reason, "localChecksum", v.Checksum, "against", v.Against, "againstScope", v.AgainstScope,
		"scope", a.scope, "idsOmitted", v.IDsOmitted, "localOnly", v.LocalOnly, "publishedOnly", v.PublishedOnly)
	if against != nil {
		a.recorder.Eventf(against, nil, corev1.EventTypeWarning, reason, "Verify", "%s", status.Truncate(note, 1000))
	}
	return false
}

// describe words a distrust: the key it is reported once by, the event reason and note.
// A scope mismatch is keyed by the two scopes alone, not by the object: each new
// publication of the other scope is the same news.
func (a *Agent) describe(track checksum.Track, v dataplane.Verdict, against client.Object) (key, reason, note string) {
	switch {
	case v.Reason == dataplane.ScopeMismatch:
		note = fmt.Sprintf("%s: no published checksum matches and none covers this data plane's scope (%s); the newest, %s, covers %s. "+
			"Publish a checksum for this scope (a one-namespace data plane needs trustplane manager --secret-checksum-scopes=cluster,namespace) "+
			"or follow the namespaces the control plane covers", track, a.scope, v.Against, v.AgainstScope)
		return "scope " + v.AgainstScope, tenginev1alpha1.ReasonScopeMismatch, note
	case v.IDsOmitted:
		var why string
		if against != nil {
			why = against.GetAnnotations()[dataplane.IDsOmittedAnnotation]
		}
		note = fmt.Sprintf("%s %s: local checksum %s; %s did not publish its IDs (%s), so the differing IDs are unknown",
			track, v.Reason, v.Checksum, v.Against, why)
	default:
		note = fmt.Sprintf("%s %s: local checksum %s; only local: [%s]; only in %s: [%s]",
			track, v.Reason, v.Checksum, strings.Join(v.LocalOnly, ", "), v.Against, strings.Join(v.PublishedOnly, ", "))
	}
	return note, tenginev1alpha1.ReasonChecksumMismatch, note
}

// reportUndecodable logs and records a Warning event on an object that does not decode,
// once per object.
func (a *Agent) reportUndecodable(ctx context.Context, track checksum.Track, u *unstructured.Unstructured, err error) {
	a.mu.Lock()
	seen := a.undecodableOf[track][string(u.GetUID())]
	a.mu.Unlock()
	if seen {
		return
	}
	log.FromContext(ctx).Info("ignoring a checksum object that does not decode", "track", track,
		"object", u.GetNamespace()+"/"+u.GetName(), "error", status.Truncate(err.Error(), 300))
	a.recorder.Eventf(u, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonUndecodableChecksum, "Verify",
		"data plane ignores this %s: it does not decode: %s", u.GetKind(), status.Truncate(err.Error(), 600))
}
