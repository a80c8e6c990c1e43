// Package config holds the generated install manifests. The CRDs are embedded so that
// tests and `make run` install exactly what `make manifests` generated.
package config

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
