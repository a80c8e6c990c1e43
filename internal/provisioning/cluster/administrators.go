package cluster

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trustplane/trustplane/internal/provisioning/access"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/status"
)

// bindAdministrators makes the cluster's cluster-admin bindings match the
// administrators: one per administrator applied, and only bindings made for former ones
// deleted. The Cluster is then Ready.
func (r *Reconciler) bindAdministrators(ctx context.Context, s *scope) error {
	c := s.c
	owner := access.AdministratorsOf(c.Namespace, c.Name)
	if err := applyAdministrators(ctx, s.admin.Client, owner, c.Spec.Administrators); err != nil {
		return targetFailed("binding administrators in the cluster", s.admin, err)
	}
	status.MarkReady(c, operatorv1alpha1.ReasonAdministratorsBound, fmt.Sprintf("administrators bound to cluster-admin: %d", len(c.Spec.Administrators)))
	return nil
}

// applyAdministrators makes the cluster's cluster-admin bindings match the administrators:
// it applies one per administrator and deletes only bindings it made for former ones.
func applyAdministrators(ctx context.Context, target client.Client, owner string, administrators []string) error {
	want := access.AdminBindings(owner, administrators)
	names := make([]string, len(want))
	for i := range want {
		names[i] = want[i].Name
		if err := apply.Apply(ctx, target, &want[i], FieldOwner); err != nil {
			return status.WriteFailed("apply", &want[i], err)
		}
	}
	return removeAdministratorsExcept(ctx, target, owner, names)
}

func removeAdministratorsExcept(ctx context.Context, target client.Client, owner string, keep []string) error {
	have := &rbacv1.ClusterRoleBindingList{}
	if err := target.List(ctx, have, client.MatchingLabels{operatorv1alpha1.AdministratorLabel: owner}); err != nil {
		return fmt.Errorf("listing administrator bindings: %w", err)
	}
	for i := range have.Items {
		if !slices.Contains(keep, have.Items[i].Name) {
			if err := client.IgnoreNotFound(target.Delete(ctx, &have.Items[i])); err != nil {
				return status.WriteFailed("delete", &have.Items[i], err)
			}
		}
	}
	return nil
}
