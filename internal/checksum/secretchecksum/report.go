package secretchecksum

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/status"
)

// reportsRequestName is the work item that sends a namespace's left-out reports.
const reportsRequestName = "left-out-reports"

// reporter tells the owners of versioned Secrets and Ingresses that the checksum leaves
// them out, once per distinct problem. Objects not meant for the checksum are never
// reported: unversioned ones (every cert-manager "*-tls" Secret) and Ingresses of another
// controller's class. A data plane does not count them either.
//
// Each report is an event whose name is derived from the object's UID and the problem,
// so a new leader that reports the same problem again finds it already there
// (AlreadyExists) instead of repeating it. Reports are sent from Reconcile, by the
// leader only.
type reporter struct {
	client   client.Client
	clock    clock.PassiveClock
	instance string
	metrics  *Metrics

	mu      sync.Mutex
	current map[string]leftOut            // track/namespace/name → its problem now
	pending map[string]map[string]leftOut // namespace → track/namespace/name → to report
}

// leftOut is one object's problem.
type leftOut struct {
	regarding corev1.ObjectReference
	track     checksum.Track
	reason    string
	message   string
}

func newReporter(c client.Client, clk clock.PassiveClock, m *Metrics) *reporter {
	instance, _ := os.Hostname()
	return &reporter{client: c, clock: clk, instance: instance, metrics: m,
		current: map[string]leftOut{}, pending: map[string]map[string]leftOut{}}
}

// observe records an object's outcome (err nil: counted, or gone) and schedules a
// report when its problem is new.
func (rp *reporter) observe(track checksum.Track, obj client.Object, err error, q handlers.Queue) {
	key := string(track) + "/" + obj.GetNamespace() + "/" + obj.GetName()
	now := leftOut{track: track}
	if l, ok := checksum.IsLeftOut(err); ok && !l.NotMeantForChecksum() {
		now.reason, now.message = l.Reason, l.Message
		now.regarding = reference(track, obj)
	}
	rp.mu.Lock()
	before := rp.current[key]
	if before.reason == now.reason && before.message == now.message {
		rp.mu.Unlock()
		return
	}
	if before.reason != "" {
		rp.metrics.leftOut.WithLabelValues(string(track), obj.GetNamespace(), before.reason).Dec()
	}
	delete(rp.current, key)
	if rp.pending[obj.GetNamespace()] != nil {
		delete(rp.pending[obj.GetNamespace()], key)
	}
	if now.reason != "" {
		rp.current[key] = now
		rp.metrics.leftOut.WithLabelValues(string(track), obj.GetNamespace(), now.reason).Inc()
		if rp.pending[obj.GetNamespace()] == nil {
			rp.pending[obj.GetNamespace()] = map[string]leftOut{}
		}
		rp.pending[obj.GetNamespace()][key] = now
	}
	rp.mu.Unlock()
	if now.reason != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: reportsRequestName}})
	}
}

// flush sends the namespace's pending reports; those that fail are kept for the retry.
func (rp *reporter) flush(ctx context.Context, ns string) error {
	rp.mu.Lock()
	batch := rp.pending[ns]
	delete(rp.pending, ns)
	rp.mu.Unlock()
	var errs []error
	for key, l := range batch {
		if err := rp.send(ctx, l); err != nil {
			errs = append(errs, err)
			rp.requeue(ns, key, l)
		}
	}
	return errors.Join(errs...)
}

func (rp *reporter) requeue(ns, key string, l leftOut) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.current[key] != l {
		return // the object changed meanwhile; its new state is pending already
	}
	if rp.pending[ns] == nil {
		rp.pending[ns] = map[string]leftOut{}
	}
	if _, newer := rp.pending[ns][key]; !newer {
		rp.pending[ns][key] = l
	}
}

// send creates the report's event under a name fixed by its content.
func (rp *reporter) send(ctx context.Context, l leftOut) error {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: l.regarding.Namespace, Name: eventName(l)},
		EventTime:           metav1.NewMicroTime(rp.clock.Now()),
		ReportingController: "trustplane-" + Name,
		ReportingInstance:   rp.instance,
		Action:              "Checksum",
		Reason:              tenginev1alpha1.ReasonLeftOut,
		Regarding:           l.regarding,
		Type:                corev1.EventTypeWarning,
		Note:                status.Truncate(fmt.Sprintf("left out of the %s checksum: %s", l.track, l.message), 1000),
	}
	if err := rp.client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("reporting %s %s/%s left out: %w", l.regarding.Kind, l.regarding.Namespace, l.regarding.Name, err)
	}
	return nil
}

// eventName is "<object>.<hash of its UID and the problem>": the same problem of the
// same object always gets the same name.
func eventName(l leftOut) string {
	sum := sha256.Sum256([]byte(string(l.regarding.UID) + "\x00" + l.reason + "\x00" + l.message))
	name := l.regarding.Name
	if len(name) > 200 {
		name = name[:200]
	}
	return name + "." + hex.EncodeToString(sum[:8])
}

func reference(track checksum.Track, obj client.Object) corev1.ObjectReference {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
	if track == checksum.TrackIngresses {
		ref.APIVersion, ref.Kind = "networking.k8s.io/v1", "Ingress"
	}
	return ref
}
