package kubeconfig

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// stale reports err, the failure to issue a kubeconfig for where the target now is, as
// not Ready whatever generation was: the published kubeconfig is for where the target was
// (it may still work, e.g. with a CA bundle that still verifies the server, so it stays).
func stale(kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target, moved string, err error) error {
	if moved == "" || err == nil {
		return err
	}
	status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonTargetChanged, "")
	return fmt.Errorf("cluster %s: %s since the published kubeconfig was issued; issuing a new one: %w", target.Name, moved, err)
}

// targetUnreachable reports a failed call to the target cluster, retried with backoff
// (unless the target refuses it for good: RBAC, policy, quota there).
func targetUnreachable(target *clustertarget.Target, err error) error {
	if down := (*clustertarget.DownError)(nil); errors.As(err, &down) {
		// Found unreachable moments ago: come back when it is tried again, with no backoff
		// grown by failures that tried nothing.
		return status.Waiting(operatorv1alpha1.ReasonTargetUnreachable, "cluster %s: %v", target.Name, target.Redact(down.Err)).After(down.RetryIn)
	}
	target.Unreachable(err) // found unreachable: the next reconciles fail at once for a while
	// A brought-along cluster's server is the tenant's choice (maybe an internal URL):
	// only the class of the failure and the host reach the status.
	return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, fmt.Errorf("cluster %s: %w", target.Name, target.Redact(err)))
}
