package testenv

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/config"
)

// InstallPolicies applies the admission policies a real install has (config/policy) and
// waits until the API server applies them: a dry-run create of a KubeconfigRequest in
// namespace comes back with what trustplane-kubeconfig-requests writes.
func (e *Env) InstallPolicies(ctx context.Context, namespace string) error {
	objs, err := config.Policies()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("trustplane-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if err := e.waitKubeconfigAdmission(ctx, namespace, true); err != nil {
		return fmt.Errorf("waiting for the admission policies to be in force: %w", err)
	}
	return nil
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
	if err := e.waitKubeconfigAdmission(ctx, namespace, false); err != nil {
		return fmt.Errorf("waiting for the admission policies to be gone: %w", err)
	}
	return nil
}

// waitKubeconfigAdmission waits until a dry-run create of a KubeconfigRequest in
// namespace comes back with (inForce) or without what trustplane-kubeconfig-requests
// writes. The API server answers 503 for a while after a CustomResourceDefinition is
// created while a mutating policy matches its kind (it learns the kind's schema from its
// own OpenAPI every few seconds): that is waited out too.
func (e *Env) waitKubeconfigAdmission(ctx context.Context, namespace string, inForce bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "policy-probe"},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "probe", Expiration: 3600,
				ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
		if err := e.Client.Create(ctx, probe, client.DryRunAll); apierrors.IsServiceUnavailable(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		mutated := slices.Contains(probe.Finalizers, "kubeconfig.trustplane.io/finalizer") &&
			probe.Annotations[operatorv1alpha1.ClusterAtCreationAnnotation] == namespace+"/probe"
		return mutated == inForce, nil
	})
}
