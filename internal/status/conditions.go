// Package status reports the outcome of a reconcile the same way for every trustplane
// kind, as kstatus (sigs.k8s.io/cli-utils), Flux and Argo CD read it; see package
// api/conditions for what the conditions mean.
//
// A controller's Reconcile reads:
//
//	obj := get()
//	patcher := status.NewPatcher(obj)       // snapshot as read
//	result, err := r.reconcile(ctx, obj)    // finalizer, compute, apply; MarkReady on success
//	return patcher.Finish(ctx, r.Client, r.Recorder, result, err)
//
// reconcile reports what is not success as an error: Waiting (something external is
// awaited), Stalled (bad input), Transient (retry with a reason), or any other error. A
// write the API server refuses persistently (403, 422, 413, admission, quota) is
// recognised by Finish whatever wraps it; WriteFailed names the object in the message.
// Finish turns the outcome into conditions, a Warning event when a failure is new, one
// status patch when the status changed, and the (Result, error) controller-runtime acts on.
package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
)

// maxMessageLength keeps a condition message under the 32768 bytes the schema of
// metav1.Condition allows, so an unusually long error cannot make the status patch invalid.
const maxMessageLength = 32 * 1024

// MarkReady records that obj's generation is fully reconciled: Ready=True, Reconciling
// and Stalled removed, observedGeneration advanced.
func MarkReady(obj conditions.Object, reason, message string) {
	set(obj, conditions.Ready, metav1.ConditionTrue, reason, message)
	remove(obj, conditions.Reconciling, conditions.Stalled)
	obj.SetObservedGeneration(obj.GetGeneration())
}

// MarkNotReady records a generation fully reconciled into a state that is not ready by
// the object's own request (a revoked credential): Ready=False, Reconciling and Stalled
// removed, observedGeneration advanced.
func MarkNotReady(obj conditions.Object, reason, message string) {
	set(obj, conditions.Ready, metav1.ConditionFalse, reason, message)
	remove(obj, conditions.Reconciling, conditions.Stalled)
	obj.SetObservedGeneration(obj.GetGeneration())
}

// MarkWaiting records work in progress that waits for something external (a Secret, a
// provisioning, the end of a throttle window): Reconciling=True and Ready=False with the
// same reason, Stalled removed, observedGeneration left as it was.
func MarkWaiting(obj conditions.Object, reason, message string) {
	set(obj, conditions.Reconciling, metav1.ConditionTrue, reason, message)
	set(obj, conditions.Ready, metav1.ConditionFalse, reason, message)
	remove(obj, conditions.Stalled)
}

// MarkRetrying records an error that is retried with backoff: Reconciling=True with the
// reason, Stalled removed, observedGeneration left as it was. Ready=True for the current
// generation stays, since what it achieved still holds (a published key set is still
// served); otherwise Ready=False says why.
func MarkRetrying(obj conditions.Object, reason, message string) { MarkPending(obj, reason, message) }

// MarkPending records work in progress while what the current generation achieved still
// holds: Reconciling=True with the reason, Stalled removed, observedGeneration left as it
// was, Ready=True for the current generation kept (otherwise Ready=False says why).
func MarkPending(obj conditions.Object, reason, message string) {
	set(obj, conditions.Reconciling, metav1.ConditionTrue, reason, message)
	remove(obj, conditions.Stalled)
	if !IsReadyForGeneration(obj) {
		set(obj, conditions.Ready, metav1.ConditionFalse, reason, message)
	}
}

// MarkStalled records that retrying alone cannot make progress: Stalled=True and
// Ready=False with the reason, Reconciling removed, observedGeneration advanced (this
// generation is definitively judged).
func MarkStalled(obj conditions.Object, reason, message string) {
	set(obj, conditions.Stalled, metav1.ConditionTrue, reason, message)
	set(obj, conditions.Ready, metav1.ConditionFalse, reason, message)
	remove(obj, conditions.Reconciling)
	obj.SetObservedGeneration(obj.GetGeneration())
}

// IsReadyForGeneration says whether Ready is True for obj's current generation.
func IsReadyForGeneration(obj conditions.Object) bool {
	ready := meta.FindStatusCondition(obj.GetConditions(), conditions.Ready)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == obj.GetGeneration()
}

// Set sets one condition of obj for its current generation; controllers use it for
// conditions of their own (a Cluster's ClusterProvisioned).
func Set(obj conditions.Object, conditionType string, status metav1.ConditionStatus, reason, message string) {
	set(obj, conditionType, status, reason, message)
}

func set(obj conditions.Object, conditionType string, status metav1.ConditionStatus, reason, message string) {
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: Truncate(message, maxMessageLength),
		ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
}

func remove(obj conditions.Object, conditionTypes ...string) {
	conds := obj.GetConditions()
	for _, t := range conditionTypes {
		meta.RemoveStatusCondition(&conds, t)
	}
	obj.SetConditions(conds)
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "…": a
// message for a condition, an event or a log line that must stay bounded.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
