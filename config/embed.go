// Package config holds the generated install manifests. The CRDs and the admission
// policies are embedded so that tests and `make run` install exactly what is shipped.
package config

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

//go:embed policy/role-aggregation.yaml policy/status-writers.yaml policy/kubeconfig-requests.yaml
var policyFiles embed.FS

// Policies returns the admission policies config/default installs (config/policy), for
// `make run` to install them as a real install does.
func Policies() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range []string{"policy/role-aggregation.yaml", "policy/status-writers.yaml", "policy/kubeconfig-requests.yaml"} {
		objs, err := decodePolicies(p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
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
