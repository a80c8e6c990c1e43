package shoot

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// nonRetryableCodes are the error codes Gardener does not retry
// (gardener pkg/api/core/v1beta1/helper/errors.go HasNonRetryableErrorCode; gardenlet
// marks an operation with one Failed at once).
var nonRetryableCodes = []string{
	"ERR_INFRA_UNAUTHENTICATED", "ERR_INFRA_UNAUTHORIZED", "ERR_INFRA_DEPENDENCIES", "ERR_INFRA_QUOTA_EXCEEDED",
	"ERR_INFRA_RATE_LIMITS_EXCEEDED", "ERR_CONFIGURATION_PROBLEM", "ERR_PROBLEMATIC_WEBHOOK",
}

// maxMirrored is how much of a description a Cluster's status keeps, and maxErrors how
// many of the Shoot's last errors: Gardener's can be long, and a status is read often.
const (
	maxMirrored = 1024
	maxErrors   = 16
)

// StatusOf is a live Shoot's last operation and last errors, as a Cluster's status
// mirrors them (infrastructure-manager's exposeShootStatusInfo); nil when it has none.
func StatusOf(live *unstructured.Unstructured) (*operatorv1alpha1.ShootLastOperation, []operatorv1alpha1.ShootLastError) {
	var op *operatorv1alpha1.ShootLastOperation
	if p := ProgressOf(live); p.Type != "" {
		op = &operatorv1alpha1.ShootLastOperation{Type: p.Type, State: p.State, Progress: int32(min(max(p.Percent, 0), 100)), Description: cut(p.Description)}
		updated, _, _ := unstructured.NestedString(live.Object, "status", "lastOperation", "lastUpdateTime")
		op.LastUpdateTime = timeOf(updated)
	}
	var errs []operatorv1alpha1.ShootLastError
	for _, e := range lastErrors(live) {
		if len(errs) == maxErrors {
			break
		}
		out := operatorv1alpha1.ShootLastError{Description: cut(e.description), TaskID: cut(e.taskID), LastUpdateTime: timeOf(e.updated)}
		for _, c := range e.codes {
			if len(out.Codes) < maxErrors && len(c) <= 64 {
				out.Codes = append(out.Codes, c)
			}
		}
		errs = append(errs, out)
	}
	return op, errs
}

// Failure is what a Shoot's failed operation means for its Cluster.
type Failure struct {
	// Stalled: Gardener will not retry (a non-retryable error code, or Failed without a
	// reported error); only a change of the Cluster or its credential helps.
	Stalled bool
	// Retrying: the operation failed and Gardener retries, or a change will.
	Retrying bool
	// Message names the codes and what failed.
	Message string
}

// FailureOf judges a live Shoot's last operation as infrastructure-manager does
// (pkg/gardener/gardener_error_handler.go), with Gardener's own set of codes it does not
// retry: an operation in Error or Failed with a non-retryable code, or Failed with no
// error reported, stalls its Cluster; one that failed with retryable codes only stays
// Reconciling. An operation under way, or one that succeeded, is no failure.
func FailureOf(live *unstructured.Unstructured) Failure {
	p := ProgressOf(live)
	if p.Phase != PhaseError && p.Phase != PhaseFailed {
		return Failure{}
	}
	errs := lastErrors(live)
	var codes, descriptions []string
	for _, e := range errs {
		for _, c := range e.codes {
			if !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
		if e.description != "" {
			descriptions = append(descriptions, e.description)
		}
	}
	var fatal []string
	for _, c := range codes {
		if slices.Contains(nonRetryableCodes, c) {
			fatal = append(fatal, c)
		}
	}
	detail := p.Message()
	if len(descriptions) > 0 {
		detail = strings.Join(descriptions, "; ")
	}
	switch {
	case len(fatal) > 0:
		return Failure{Stalled: true, Message: cut("Gardener does not retry " + strings.Join(fatal, ", ") + ": " + detail)}
	case p.Phase == PhaseFailed && len(errs) == 0:
		return Failure{Stalled: true, Message: cut("Gardener gave the shoot up: " + detail)}
	case len(codes) > 0:
		return Failure{Retrying: true, Message: cut(strings.Join(codes, ", ") + " (retried): " + detail)}
	}
	return Failure{Retrying: true, Message: cut(detail)}
}

type lastError struct {
	description, taskID, updated string
	codes                        []string
}

func lastErrors(live *unstructured.Unstructured) []lastError {
	var out []lastError
	for _, e := range sliceOf(live.Object, "status", "lastErrors") {
		le := lastError{}
		le.description, _ = e["description"].(string)
		le.taskID, _ = e["taskID"].(string)
		le.updated, _ = e["lastUpdateTime"].(string)
		le.codes, _, _ = unstructured.NestedStringSlice(e, "codes")
		out = append(out, le)
	}
	return out
}

func cut(s string) string {
	if len(s) <= maxMirrored {
		return s
	}
	return strings.ToValidUTF8(s[:maxMirrored-3], "") + "..."
}

func timeOf(s string) *metav1.Time {
	t := &metav1.Time{}
	if s == "" || t.UnmarshalQueryParameter(s) != nil {
		return nil
	}
	return t
}
