// Package config holds the generated install manifests. The CRDs and the admission
// policies are embedded so that tests and `make run` install exactly what is shipped.
package config

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

//go:embed crd/bases/*.yaml
var crdFiles embed.FS

// CRDs returns every trustplane CustomResourceDefinition.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := fs.Glob(crdFiles, "crd/bases/*.yaml")
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		raw, err := crdFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

//go:embed policy/role-aggregation.yaml policy/status-writers.yaml policy/kubeconfig-requests.yaml policy/owner-labels.yaml policy/finalizers.yaml policy/cluster-versions.yaml policy/pod-identity-policies.yaml
var policyFiles embed.FS

// Policies returns the admission policies config/default installs (config/policy), for
// `make run` to install them as a real install does.
func Policies() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range []string{"policy/role-aggregation.yaml", "policy/status-writers.yaml", "policy/kubeconfig-requests.yaml", "policy/owner-labels.yaml", "policy/finalizers.yaml",
		"policy/cluster-versions.yaml", "policy/pod-identity-policies.yaml"} {
		objs, err := decodePolicies(p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// InstallPolicies applies the admission policies (Policies) with c, as config/default
// installs them, and waits until KubeconfigRequests can be created in namespace with the
// policies in force (WaitForKubeconfigAdmission).
func InstallPolicies(ctx context.Context, c client.Client, namespace string) error {
	objs, err := Policies()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("trustplane-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if err := WaitForKubeconfigAdmission(ctx, c, namespace, true); err != nil {
		return fmt.Errorf("waiting for the admission policy trustplane-kubeconfig-requests: %w", err)
	}
	return nil
}

func decodePolicies(path string) ([]*unstructured.Unstructured, error) {
	raw, err := policyFiles.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding config/%s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// WaitForKubeconfigAdmission waits until a dry-run create of a KubeconfigRequest in
// namespace comes back with (inForce) or without what the admission policy
// trustplane-kubeconfig-requests writes. While a mutating policy matches a kind the API
// server has not yet learned the schema of (it reads its own OpenAPI every 5 seconds: a
// CRD just created, an API server just started), it answers creates of that kind 503:
// that is waited out too.
func WaitForKubeconfigAdmission(ctx context.Context, c client.Client, namespace string, inForce bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "policy-probe"},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "probe", Expiration: 3600,
				ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
		if err := c.Create(ctx, probe, client.DryRunAll); apierrors.IsServiceUnavailable(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		mutated := slices.Contains(probe.Finalizers, "kubeconfig.trustplane.io/finalizer") &&
			probe.Annotations[operatorv1alpha1.ClusterAtCreationAnnotation] == namespace+"/probe"
		return mutated == inForce, nil
	})
}
