package cluster

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// gardenWriteFailed classifies the garden's answer to a write of obj:
//   - 422 Invalid and 400 BadRequest: Gardener (its validation, an admission plugin or
//     policy) judged the Shoot itself. Only a change of the Cluster (or of the operator's
//     settings) can help: Stalled, reason InvalidSpec, with Gardener's field paths and
//     messages, and a terminal error.
//   - 403 Forbidden (RBAC in the project, an admission plugin, webhook or policy, a quota):
//     Stalled, reason GardenForbidden, retried with backoff as the garden's rules change
//     outside the Cluster.
//   - no answer, a timeout, 429 and 5xx: GardenUnreachable, retried with backoff.
//   - anything else (409, 404, ...): retried with backoff as a transient error.
//
// Nothing in the garden is touched because of a refusal.
func gardenWriteFailed(c *operatorv1alpha1.Cluster, verb string, obj client.Object, err error) error {
	what := fmt.Sprintf("%s shoot %s/%s", verb, obj.GetNamespace(), obj.GetName())
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		msg := fmt.Sprintf("the garden refused to %s as invalid: %s", what, gardenMessage(err))
		notProvisionedUnlessItWas(c, operatorv1alpha1.ReasonInvalidSpec, msg)
		return status.Stalled(operatorv1alpha1.ReasonInvalidSpec, "%s", msg)
	case apierrors.IsForbidden(err):
		msg := fmt.Sprintf("the garden forbids to %s: %s", what, gardenMessage(err))
		notProvisionedUnlessItWas(c, operatorv1alpha1.ReasonGardenForbidden, msg)
		return status.Warn(status.Refused(operatorv1alpha1.ReasonGardenForbidden, errors.New(msg)))
	case isUnreachable(err):
		return gardenUnreachable(c, fmt.Errorf("%s: %w", what, err))
	default:
		return status.Transient(conditions.ReasonTransientError, fmt.Errorf("garden: %s: %w", what, err))
	}
}

// gardenCallFailed classifies the garden's answer to a request other than a write of
// the Shoot (an admin kubeconfig): 403 is GardenForbidden, anything else is retried as
// GardenUnreachable.
func gardenCallFailed(c *operatorv1alpha1.Cluster, err error) error {
	if apierrors.IsForbidden(err) {
		msg := "the garden forbids it: " + gardenMessage(err)
		notProvisionedUnlessItWas(c, operatorv1alpha1.ReasonGardenForbidden, msg)
		return status.Warn(status.Refused(operatorv1alpha1.ReasonGardenForbidden, fmt.Errorf("%s: %w", msg, err)))
	}
	return gardenUnreachable(c, err)
}

// notProvisionedUnlessItWas reports on ClusterProvisioned why the cluster is not there,
// unless it is: a refused change leaves a provisioned Shoot running as it was.
func notProvisionedUnlessItWas(c *operatorv1alpha1.Cluster, reason, msg string) {
	if !meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned) {
		setProvisioned(c, metav1.ConditionFalse, reason, msg)
	}
}

// isUnreachable: no answer at all (connection refused or reset, DNS, TLS, a timeout on
// the way) or an answer that says "later": 429 and every 5xx.
func isUnreachable(err error) bool {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return true
	}
	code := apiStatus.Status().Code
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

const (
	maxCauses           = 10
	maxCauseLength      = 300
	maxGardenMessageLen = 2000
)

// gardenMessage is what the garden said: each cause as "<field>: <message>" (Gardener's
// validation names every problem), else the status message; trimmed, so a garden that
// lists a hundred problems still fits a condition and an event.
func gardenMessage(err error) string {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return status.Truncate(strings.TrimSpace(err.Error()), maxGardenMessageLen)
	}
	s := apiStatus.Status()
	if s.Details == nil || len(s.Details.Causes) == 0 {
		return status.Truncate(strings.TrimSpace(s.Message), maxGardenMessageLen)
	}
	causes := s.Details.Causes
	parts := make([]string, 0, min(len(causes), maxCauses)+1)
	for i, cause := range causes {
		if i == maxCauses {
			parts = append(parts, fmt.Sprintf("and %d more", len(causes)-maxCauses))
			break
		}
		part := status.Truncate(strings.TrimSpace(cause.Message), maxCauseLength)
		if cause.Field != "" {
			part = cause.Field + ": " + part
		}
		parts = append(parts, part)
	}
	msg := strings.Join(parts, "; ")
	// An admission policy's or webhook's name is in the status message only.
	if prefix, _, found := strings.Cut(s.Message, " denied request"); found && strings.Contains(prefix, "AdmissionPolicy '") {
		msg = status.Truncate(strings.TrimSpace(prefix), maxCauseLength) + " denied the request: " + msg
	}
	return status.Truncate(strings.TrimSpace(msg), maxGardenMessageLen)
}
