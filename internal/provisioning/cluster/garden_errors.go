package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/status"
)

// DesiredHashAnnotation on a Shoot is a hash of the Shoot the Cluster operator last
// applied (labels, annotations and spec, from the Cluster's spec, the credential and the
// operator's settings). The Shoot is applied again only when that hash changes: Gardener
// updates the Shoot's status at every step of its work, and each would otherwise cost an
// apply the garden has to process.
const DesiredHashAnnotation = "cluster.trustplane.io/desired-hash"

// applyShoot writes desired to the garden unless the live Shoot already carries its hash.
// Either way desired holds the Shoot as the garden has it afterwards (its status
// included), for the caller to follow.
func (r *Reconciler) applyShoot(ctx context.Context, c *operatorv1alpha1.Cluster, desired *unstructured.Unstructured) error {
	hash, err := desiredHash(desired)
	if err != nil {
		return fmt.Errorf("hashing the desired shoot %s: %w", desired.GetName(), err)
	}
	live := garden.NewShoot()
	err = r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
	switch {
	case err == nil && live.GetAnnotations()[DesiredHashAnnotation] == hash:
		desired.Object = live.Object
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", desired.GetName(), err))
	}
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DesiredHashAnnotation] = hash
	desired.SetAnnotations(annotations)
	if err := r.Garden.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return gardenWriteFailed(c, "apply", desired, err)
	}
	return nil
}

// desiredHash is a hash of the Shoot's metadata (labels, annotations) and spec as applied;
// encoding/json sorts map keys, so equal Shoots hash alike.
func desiredHash(desired *unstructured.Unstructured) (string, error) {
	raw, err := json.Marshal(map[string]any{
		"labels": desired.GetLabels(), "annotations": desired.GetAnnotations(), "spec": desired.Object["spec"],
	})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16]), nil
}

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
