package cluster

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/status"
)

// stall reports a problem only a change of the Cluster (or its Secret) can fix: it is not
// provisioned, and Stalled.
func stall(c *operatorv1alpha1.Cluster, reason, msg string) error {
	setProvisioned(c, metav1.ConditionFalse, reason, msg)
	return status.Stalled(reason, "%s", msg)
}

// waiting reports a state that a watched change will end: the cluster is not (or no
// longer) provisioned yet.
func waiting(c *operatorv1alpha1.Cluster, reason, msg string) error {
	setProvisioned(c, metav1.ConditionFalse, reason, msg)
	return status.Waiting(reason, "%s", msg)
}

func setProvisioned(c *operatorv1alpha1.Cluster, provisioned metav1.ConditionStatus, reason, msg string) {
	status.Set(c, operatorv1alpha1.ConditionClusterProvisioned, provisioned, reason, msg)
}

// gardenUnreachable reports a call to the garden that got no answer, or a 429 or 5xx
// (gardenWriteFailed sorts the answers): retried with backoff, with a Warning event when
// new; ClusterProvisioned says so too until the Shoot was provisioned.
func gardenUnreachable(c *operatorv1alpha1.Cluster, err error) error {
	err = status.Transient(operatorv1alpha1.ReasonGardenUnreachable, fmt.Errorf("garden: %w", err))
	if !meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned) {
		setProvisioned(c, metav1.ConditionFalse, status.Reason(err), err.Error())
	}
	return status.Warn(err)
}

// targetFailed reports a failed call to the cluster itself. A brought-along cluster's
// server is the tenant's choice: its errors reach the status only as a class and the host
// (kubeconfig.Failure), never with what the server answered. A 401 or 403 is stalled (the
// kubeconfig or the cluster's RBAC must change) yet retried with backoff; anything else
// is retried with backoff, with a Warning event when new.
func targetFailed(what string, target *clustertarget.Target, err error) error {
	err = fmt.Errorf("%s: %w", what, target.Redact(err))
	if te := (*tenantkubeconfig.TargetError)(nil); errors.As(err, &te) && (te.Class == tenantkubeconfig.Unauthorized || te.Class == tenantkubeconfig.Forbidden) {
		return status.Refused(operatorv1alpha1.ReasonClusterAccessDenied, err)
	}
	return status.Warn(status.Transient(operatorv1alpha1.ReasonClusterUnreachable, err))
}
