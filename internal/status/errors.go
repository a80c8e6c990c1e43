package status

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
)

// kind is what a reconcile's error means for the conditions and the retry.
type kind int

const (
	// retrying: an error retrying may fix; returned for a rate-limited requeue.
	retrying kind = iota
	// waiting: something external is awaited; a watch (or RequeueAfter) brings it back.
	waiting
	// stalled: the input is wrong; a terminal error, a watch brings it back on a change.
	stalled
	// refused: the API server persistently refuses a write; stalled, yet retried with
	// backoff, since RBAC, quota and policy change outside the object.
	refused
)

// Error is a reconcile outcome other than success, with the reason its conditions carry.
// Its text is the conditions' message: it must never contain secret material.
type Error struct {
	kind         kind
	reason       string
	err          error
	requeueAfter time.Duration
	warn         bool
	keepReady    bool
}

func (e *Error) Error() string { return e.err.Error() }

func (e *Error) Unwrap() error { return e.err }

// Reason is the condition reason the error is reported with.
func (e *Error) Reason() string { return e.reason }

// After makes a Waiting error come back after d: for when time itself is awaited.
func (e *Error) After(d time.Duration) *Error {
	e.requeueAfter = d
	return e
}

// KeepReady makes a Waiting error leave Ready=True for the current generation as it is:
// what was achieved still holds while the wait lasts (the previous key set is served
// while the next one waits for the end of the update interval). Reconciling=True says
// what is pending, as kstatus reads it.
func (e *Error) KeepReady() *Error {
	e.keepReady = true
	return e
}

// Warn makes a Waiting error emit a Warning event when it is new (stalled and refused
// ones always do).
func (e *Error) Warn() *Error {
	e.warn = true
	return e
}

// Warn makes the outcome of err emit a Warning event when it is new, e.g. for a Transient
// error worth telling users about (a garden that does not answer). nil stays nil.
func Warn(err error) error {
	if err == nil {
		return nil
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		e.warn = true
		return err
	}
	e := outcomeOf(err)
	e.warn = true
	return e
}

// Waiting reports that the reconcile waits for something external (a Secret to be
// created, a Shoot to be provisioned, a pool to grow): Reconciling=True, Ready=False, no
// requeue (a watch brings the object back) unless After says when.
func Waiting(reason, format string, args ...any) *Error {
	return &Error{kind: waiting, reason: reason, err: fmt.Errorf(format, args...)}
}

// Stalled reports an input error retrying cannot fix: Stalled=True, Ready=False, a
// Warning event, and a terminal error (no retry loop); a watch on the input brings the
// object back when it changes.
func Stalled(reason, format string, args ...any) *Error {
	return &Error{kind: stalled, reason: reason, err: fmt.Errorf(format, args...)}
}

// Transient reports err, retried with backoff, with reason on Reconciling (and on Ready
// unless Ready=True for this generation stays). An outcome err already carries (a
// Waiting, Stalled or persistent API failure inside it) wins over reason. nil stays nil.
func Transient(reason string, err error) error {
	if err == nil {
		return nil
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return err
	}
	if apiReason, persistent := Classify(err); persistent {
		return &Error{kind: refused, reason: apiReason, err: err}
	}
	return &Error{kind: retrying, reason: reason, err: err}
}

// WriteFailed describes a failed write of obj as "<verb> <Kind> <namespace>/<name>: <the
// server's message>", classified: a persistent failure (see Classify) is reported as
// refused, anything else as an error to retry. nil stays nil; errors.Is and errors.As see
// the API server's error through it.
func WriteFailed(verb string, obj client.Object, err error) error {
	if err == nil {
		return nil
	}
	described := fmt.Errorf("%s %s %s: %w", verb, kindOf(obj), keyOf(obj), err)
	if reason, persistent := Classify(err); persistent {
		return &Error{kind: refused, reason: reason, err: described}
	}
	return described
}

// Classify says whether err is an API server answer that retrying the same write will
// get again until something outside the object changes, and which: AdmissionDenied (a
// webhook or a ValidatingAdmissionPolicy), QuotaExceeded (a ResourceQuota), TooLarge (413,
// etcd's "request is too large", a value over its size limit), Forbidden (403, RBAC) or
// Invalid (422). Conflicts, 5xx, timeouts, throttling and connection errors are not.
func Classify(err error) (reason string, persistent bool) {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return "", false
	}
	s := apiStatus.Status()
	switch {
	case isAdmissionDenial(s):
		return conditions.ReasonAdmissionDenied, true
	case isQuotaDenial(s):
		return conditions.ReasonQuotaExceeded, true
	case isTooLarge(err, s):
		return conditions.ReasonTooLarge, true
	case apierrors.IsForbidden(err):
		return conditions.ReasonForbidden, true
	case apierrors.IsInvalid(err):
		return conditions.ReasonInvalid, true
	}
	return "", false
}

// isAdmissionDenial recognises the messages kube-apiserver gives a denial by an admission
// webhook ("admission webhook %q denied the request") and by a ValidatingAdmissionPolicy
// ("ValidatingAdmissionPolicy '%s' [with binding '%s'] denied request"); the status code
// is the webhook's or the policy's choice, so only a server error (webhook down) is excluded.
func isAdmissionDenial(s metav1.Status) bool {
	if s.Code >= http.StatusInternalServerError {
		return false
	}
	return strings.Contains(s.Message, "admission webhook ") && strings.Contains(s.Message, " denied the request") ||
		strings.Contains(s.Message, "AdmissionPolicy '") && strings.Contains(s.Message, " denied request")
}

// isQuotaDenial recognises the ResourceQuota admission plugin's 403s: "exceeded quota",
// "failed quota" (a required limit missing) and "status unknown for quota".
func isQuotaDenial(s metav1.Status) bool {
	if s.Reason != metav1.StatusReasonForbidden {
		return false
	}
	for _, m := range []string{"exceeded quota: ", "failed quota: ", "status unknown for quota: "} {
		if strings.Contains(s.Message, m) {
			return true
		}
	}
	return false
}

// isTooLarge: a request body over the API server's limit (413), an object over etcd's
// limit ("etcdserver: request is too large") or over the API server's etcd client's
// ("trying to send message larger than max"), or a value over its size limit (422 with a
// FieldValueTooLong cause counted in bytes, e.g. a ConfigMap over 1 MiB).
func isTooLarge(err error, s metav1.Status) bool {
	if apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(s.Message, "request is too large") ||
		strings.Contains(s.Message, "message larger than max") {
		return true
	}
	if s.Reason != metav1.StatusReasonInvalid || s.Details == nil {
		return false
	}
	for _, c := range s.Details.Causes {
		if c.Type == metav1.CauseTypeTooLong && strings.Contains(c.Message, "bytes") {
			return true
		}
	}
	return false
}

// Reason is the condition reason err is reported with ("" for nil).
func Reason(err error) string {
	if err == nil {
		return ""
	}
	return outcomeOf(err).reason
}

// outcomeOf is what err means: the *Error it carries, else a persistent API failure, else
// an error to retry.
func outcomeOf(err error) *Error {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	if reason, persistent := Classify(err); persistent {
		return &Error{kind: refused, reason: reason, err: err}
	}
	return &Error{kind: retrying, reason: conditions.ReasonTransientError, err: err}
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

func keyOf(obj client.Object) string {
	name := obj.GetName()
	if name == "" && obj.GetGenerateName() != "" {
		name = obj.GetGenerateName() + "*"
	}
	if obj.GetNamespace() == "" {
		return name
	}
	return obj.GetNamespace() + "/" + name
}
