package testenv

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
)

// InstallPolicies applies the admission policies a real install has (config/policy) and
// waits until the API server applies them: a dry-run create of a KubeconfigRequest in
// namespace comes back with what trustplane-kubeconfig-requests writes.
func (e *Env) InstallPolicies(ctx context.Context, namespace string) error {
	return config.InstallPolicies(ctx, e.Client, namespace)
}

// RemovePolicies deletes what InstallPolicies applied and waits until the API server no
// longer applies them.
func (e *Env) RemovePolicies(ctx context.Context, namespace string) error {
	objs, err := config.Policies()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gone := &unstructured.Unstructured{}
		gone.SetGroupVersionKind(obj.GroupVersionKind())
		gone.SetName(obj.GetName())
		if err := client.IgnoreNotFound(e.Client.Delete(ctx, gone)); err != nil {
			return err
		}
	}
	if err := config.WaitForKubeconfigAdmission(ctx, e.Client, namespace, false); err != nil {
		return fmt.Errorf("waiting for the admission policies to be gone: %w", err)
	}
	return nil
}
