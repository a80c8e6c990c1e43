package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// withdrawFromPrevious withdraws what the previous Cluster was granted before anything
// is granted in the one the spec names now.
func (r *Reconciler) withdrawFromPrevious(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr := s.kr
	if s.held == nil || *s.held == s.key {
		return reconcile.Result{}, nil
	}
	// The cache may not have the status of the reconcile that already withdrew from there
	// and was granted here: withdrawing again would, where both Clusters reach the same
	// API server, delete the live ServiceAccount and with it the published token. Only a
	// request read as it is stored is acted on; the cache catches up within moments (a
	// status change is no event this controller is sent, hence the requeue).
	if current, err := r.isCurrent(ctx, kr); err != nil || !current {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, err
	}
	if err := r.withdraw(ctx, kr, *s.held); err != nil {
		status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonWithdrawalPending, "")
		return reconcile.Result{}, status.Transient(operatorv1alpha1.ReasonWithdrawalPending, fmt.Errorf(
			"spec.cluster changed: the kubeconfig for Cluster %s is withdrawn; deleting its ServiceAccount, roles, bindings and tokens there is pending: %w", s.held, err))
	}
	s.held = nil
	return reconcile.Result{}, nil
}

// grantedIn is the Cluster the request's grants live in, if any. Before the request's
// first status is stored, they may live in the Cluster admission recorded at its creation
// (a reconcile that granted there may have died before its status write). A request
// issued by an earlier version, which did not record it, holds them in the Cluster it
// names.
func grantedIn(kr *operatorv1alpha1.KubeconfigRequest) *types.NamespacedName {
	if recorded, ok := kr.RecordedCluster(); ok {
		return &recorded
	}
	if kr.Status.IssuedAt != nil {
		key := kr.ClusterKey()
		return &key
	}
	return nil
}

// isCurrent says whether kr, as read from the cache, is the stored version.
func (r *Reconciler) isCurrent(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	stored := &metav1.PartialObjectMetadata{}
	stored.SetGroupVersionKind(operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		return false, fmt.Errorf("reading KubeconfigRequest %s/%s: %w", kr.Namespace, kr.Name, err)
	}
	return stored.ResourceVersion == kr.ResourceVersion, nil
}

// finalize withdraws what the request holds in the Cluster its grants live in.
func (r *Reconciler) finalize(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	if !Finalizer.Held(kr) {
		return nil
	}
	if held := grantedIn(kr); held != nil {
		if err := r.withdraw(ctx, kr, *held); err != nil {
			// Keep the finalizer: the target must be cleaned up.
			return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, err)
		}
	}
	r.firstIssues.seen(kr.UID)
	return Finalizer.Release(ctx, r.Client, kr)
}

// deny withdraws whatever the request holds (a request denied now must not keep what an
// earlier spec or grant gave it) and reports the denial: Stalled, until the spec, the
// ceiling or the Cluster's grant changes.
func (r *Reconciler) deny(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, reason, message string) error {
	if held := grantedIn(kr); held != nil || kr.Status.Kubeconfig != "" {
		// Only an issued kubeconfig is news; a record of where grants may live (made at
		// creation, or stored since) may be all there is, and withdrawing is a precaution.
		handedOut := kr.Status.IssuedAt != nil || kr.Status.Kubeconfig != ""
		if held == nil {
			if err := r.unpublish(ctx, kr); err != nil {
				return fmt.Errorf("%s; withdrawing the kubeconfig: %w", message, err)
			}
		} else if err := r.withdraw(ctx, kr, *held); err != nil {
			return status.Transient(reason, fmt.Errorf("%s; the kubeconfig is withdrawn, and deleting what it was granted in Cluster %s is pending: %w", message, held, err))
		}
		if handedOut {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, reason, "Withdraw", "withdrew the kubeconfig: %s", message)
		}
	}
	return status.Stalled(reason, "%s", message)
}

// revoke withdraws the kubeconfig: at once from the status and the published Secret, even
// when the target cannot be reached; then the token bindings (the target API server
// rejects their tokens from then on), the ServiceAccount and the roles in the target.
// Nothing is issued while revoke is "true".
func (r *Reconciler) revoke(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	had := kr.Status.Kubeconfig != ""
	var err error
	if held := grantedIn(kr); held != nil {
		err = r.withdraw(ctx, kr, *held)
		if err != nil {
			err = fmt.Errorf("revoked: the kubeconfig is gone from the status and the Secret; deleting its token bindings, ServiceAccount and roles in Cluster %s is pending (its token stays valid there until then): %w", held, err)
		}
	} else {
		err = r.unpublish(ctx, kr)
		kr.Status.Credentials = nil // nothing granted, so no token bound to anything
	}
	if had && kr.Status.Kubeconfig == "" {
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonRevoked, "Revoke", "revoked the kubeconfig for cluster %s", kr.Spec.Cluster)
	}
	if err != nil {
		// Not Ready whatever generation was: the credential this generation was Ready
		// with is revoked.
		status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonRevokePending, "")
		return status.Transient(operatorv1alpha1.ReasonRevokePending, err)
	}
	status.MarkNotReady(kr, operatorv1alpha1.ReasonRevoked, "revoked; set "+operatorv1alpha1.RevokeAnnotation+` to "false" to issue a new kubeconfig`)
	return nil
}

// withdraw unpublishes the kubeconfig and deletes everything the request holds in the
// Cluster at key, found by label: token bindings first (their tokens die with them), then
// the ServiceAccount, then roles and bindings in every namespace. A Cluster that is gone,
// or is going with no way in left, has nothing more to withdraw (an event says so).
func (r *Reconciler) withdraw(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) error {
	if err := r.unpublish(ctx, kr); err != nil {
		return err
	}
	report, err := r.reporter(ctx, kr, key)
	if err != nil {
		return err
	}
	t, err := r.targets.Get(ctx, key)
	switch {
	case errors.Is(err, clustertarget.ErrClusterGone):
		// A Cluster waits for the requests holding grants in it before it goes, so this is
		// a cluster that never was.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonClusterGone, "Withdraw", "%v: nothing to clean up", err)
	case errors.Is(err, clustertarget.ErrNoWayIn):
		// Holding on would hold the Cluster, and with it its namespace, for ever.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonTargetNotCleanedUp, "Withdraw",
			"%v: the ServiceAccount, roles and bindings labelled %s=%s stay in the target", report(err), RequestLabel, access.TargetName(kr))
	case err != nil:
		return report(err)
	default:
		// Left unclassified: the caller says what is pending (a persistent refusal by the
		// target, RBAC there say, is still recognised as one). A target found unreachable
		// moments ago is not waited for again.
		err := t.Down()
		if err == nil {
			err = deleteEverything(ctx, t.Client, kr)
			t.Unreachable(err)
		}
		if err != nil {
			return report(fmt.Errorf("cluster %s: %w", t.Name, t.Redact(err)))
		}
	}
	kr.Status.GrantedIn = nil
	kr.Status.Credentials = nil // their bindings went with everything else
	return nil
}

// reporter says how a failure to withdraw from the Cluster at key reaches the request.
// The Cluster named by status.grantedIn is acted on even when it does not grant the
// request's namespace: it may have stopped granting it, and what the request holds there
// must go. A forged status (possible only without the admission policy
// trustplane-status-writers) names such a Cluster too, and the two cannot be told apart.
// Acting there is harmless (deleteEverything touches only objects labelled with this
// request's own targetName), but what happens there is about someone else's Cluster: its
// kubeconfig, its server, its Shoot. So for a Cluster that does not grant the request's
// namespace, the request learns only that the withdrawal is pending; the cause goes to
// the manager's log.
func (r *Reconciler) reporter(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) (func(error) error, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, key, cluster); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Cluster %s: %w", key, err)
	} else if err != nil || cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
		return func(err error) error { return err }, nil
	}
	return func(err error) error {
		ctrl.LoggerFrom(ctx).Info("withdrawing from a Cluster that does not grant the request's namespace", "cluster", key, "error", err.Error())
		return fmt.Errorf("cluster %s does not grant namespace %s: the cause is in the manager's log, not reported here", key, kr.Namespace)
	}, nil
}

// unpublish clears the kubeconfig from the status and deletes the published Secret: the
// management cluster's part of a withdrawal, which never waits for a target cluster.
func (r *Reconciler) unpublish(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	taken, err := r.secretNameTaken(ctx, kr)
	if err != nil {
		return err
	}
	if !taken { // someone else's Secret of that name is never deleted
		published := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kr.Namespace, Name: secretName(kr)}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, published)); err != nil {
			return status.WriteFailed("delete", published, err)
		}
	}
	kr.Status.Kubeconfig, kr.Status.SecretName, kr.Status.ExpirationTimestamp, kr.Status.IssuedAt = "", "", nil, nil
	// A first issue still waiting for the cache is over: the next issue (after an
	// un-revoke, an allowed request, a move) is a first issue of its own, not one the
	// cache is behind on.
	r.firstIssues.seen(kr.UID)
	return nil
}

// secretName is the Secret the kubeconfig is published in.
func secretName(kr *operatorv1alpha1.KubeconfigRequest) string { return kr.Name + publishedNameSuffix }

// secretNameTaken says whether a Secret of the published name exists that this request
// does not control (a user's, say a brought-along cluster's admin kubeconfig): it is
// never overwritten or deleted. Read from the metadata cache: no API call.
func (r *Reconciler) secretNameTaken(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: kr.Namespace, Name: secretName(kr)}, existing); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !metav1.IsControlledBy(existing, kr), nil
}

// deleteEverything deletes what the request holds in a target cluster: everything
// labelled with its target name, and everything labelled with its UID (objects made under
// the other of its two names, say by an earlier version that died before its status
// named them).
func deleteEverything(ctx context.Context, c client.Client, kr *operatorv1alpha1.KubeconfigRequest) error {
	for _, selector := range []client.MatchingLabels{{RequestLabel: access.TargetName(kr)}, {RequestUIDLabel: string(kr.UID)}} {
		if err := deleteSelected(ctx, c, selector); err != nil {
			return err
		}
	}
	return nil
}

// deleteSelected deletes the token bindings, the ServiceAccount, the roles and the
// bindings the selector selects.
func deleteSelected(ctx context.Context, c client.Client, selector client.MatchingLabels) error {
	if err := c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the token bindings in %s: %w", TargetNamespace, err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ServiceAccount{}, client.InNamespace(TargetNamespace), selector); err != nil {
		return fmt.Errorf("deleting the ServiceAccount in %s: %w", TargetNamespace, err)
	}
	return deleteRBACSelected(ctx, c, selector, "", false)
}

func deleteRBACSelected(ctx context.Context, c client.Client, selector client.MatchingLabels, keepRoleIn string, keepClusterRole bool) error {
	lists := []client.ObjectList{&rbacv1.RoleBindingList{}, &rbacv1.RoleList{}}
	if !keepClusterRole {
		lists = append(lists, &rbacv1.ClusterRoleBindingList{}, &rbacv1.ClusterRoleList{})
	}
	for _, list := range lists {
		if err := c.List(ctx, list, selector); err != nil {
			return fmt.Errorf("listing %T by label %v: %w", list, selector, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			obj := o.(client.Object)
			if obj.GetNamespace() != "" && obj.GetNamespace() == keepRoleIn {
				continue
			}
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return status.WriteFailed("delete", obj, err)
			}
		}
	}
	return nil
}
