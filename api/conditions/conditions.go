// Package conditions holds what every trustplane API reports the same way: the condition
// types kstatus (sigs.k8s.io/cli-utils), Flux and Argo CD health checks read, the reasons
// of failures that are not specific to one kind, and the interface through which
// internal/status records a reconcile's outcome on any of the kinds.
//
// The semantics, for every kind:
//
//   - Ready is present after the first reconcile. True: what the spec asks for is in place.
//   - Reconciling=True: work is in progress, being waited for, or retried after an error
//     that retrying may fix. Ready then says why it is not True (or stays True while
//     what this generation achieved still holds).
//   - Stalled=True: retrying alone cannot make progress: the input is wrong, or the API
//     server persistently refuses a write (policy, quota, RBAC). Never together with
//     Reconciling.
//   - status.observedGeneration is advanced only when its generation was fully reconciled
//     (Ready=True) or definitively stalled, never while Reconciling.
package conditions

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Condition types.
const (
	// Ready says whether what the spec asks for is in place.
	Ready = "Ready"
	// Reconciling says the controller is working on the object, waiting for something it
	// needs, or retrying after a transient error.
	Reconciling = "Reconciling"
	// Stalled says the controller cannot make progress without a change: to the object,
	// to its input, or to the policy, quota or RBAC that refuses its writes.
	Stalled = "Stalled"
)

// Reasons of persistent API failures: a write the API server refuses the same way on every
// retry until something outside the object changes. They are reported with Stalled=True
// and Ready=False, and still retried with the controller's backoff.
const (
	// ReasonForbidden: the controller's identity may not make the write (RBAC).
	ReasonForbidden = "Forbidden"
	// ReasonInvalid: the API server refuses the written object as invalid.
	ReasonInvalid = "Invalid"
	// ReasonTooLarge: the written object or the request is larger than the API server
	// or etcd accepts.
	ReasonTooLarge = "TooLarge"
	// ReasonAdmissionDenied: an admission webhook or a ValidatingAdmissionPolicy denied
	// the write.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonQuotaExceeded: a ResourceQuota of the namespace refuses the write.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// ReasonTransientError: an API call failed in a way retrying may fix (connection refused,
// 5xx, timeout, conflict); it is retried with backoff. Used when the controller has no
// more specific reason for the failure.
const ReasonTransientError = "TransientError"

// Object is an API object whose status carries conditions and an observedGeneration.
// Every trustplane kind with a status implements it in its group's conditions.go.
type Object interface {
	metav1.Object
	runtime.Object

	// GetConditions returns status.conditions.
	GetConditions() []metav1.Condition
	// SetConditions replaces status.conditions.
	SetConditions([]metav1.Condition)
	// GetObservedGeneration returns status.observedGeneration.
	GetObservedGeneration() int64
	// SetObservedGeneration sets status.observedGeneration.
	SetObservedGeneration(int64)
}

// ReconcileRequestedAnnotation asks the controller of an object for a reconcile now, as
// Flux's reconcile.fluxcd.io/requestedAt does: its value is any string that changes with
// each request (`trustplane reconcile` writes the time, RFC 3339). The controllers of the
// kinds that implement ReconcileRequestStatus reconcile when it changes, and record the
// value they handled in status.lastHandledReconcileAt.
const ReconcileRequestedAnnotation = "reconcile.trustplane.io/requestedAt"

// ReconcileRequestStatus is a kind whose status records the last value of
// ReconcileRequestedAnnotation its controller handled (status.lastHandledReconcileAt):
// a reconcile that ran after the request wrote its status.
type ReconcileRequestStatus interface {
	// GetLastHandledReconcileAt returns status.lastHandledReconcileAt.
	GetLastHandledReconcileAt() string
	// SetLastHandledReconcileAt sets status.lastHandledReconcileAt.
	SetLastHandledReconcileAt(string)
}
