package config

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// brokenSentence is a line break inside a paragraph: a line that goes on on the next one,
// which is neither a list item nor indented (an example).
var brokenSentence = regexp.MustCompile(`[^\n]\n([^\n\s\-*•0-9])`)

// TestDescriptionsAreReflowed: no CRD description breaks a sentence where its Go comment
// wrapped (hack/crddescriptions, run by `make manifests`), so `kubectl explain` and API
// documentation show whole paragraphs.
func TestDescriptionsAreReflowed(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			walkDescriptions(*v.Schema.OpenAPIV3Schema, crd.Name+"/"+v.Name, func(path, d string) {
				checked++
				if m := brokenSentence.FindStringIndex(d); m != nil {
					t.Errorf("%s: description breaks a line mid-paragraph: %q", path, d[max(0, m[0]-40):min(len(d), m[1]+20)])
				}
			})
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d descriptions", checked)
	}
}

func walkDescriptions(s apiextensionsv1.JSONSchemaProps, path string, fn func(path, description string)) {
	if s.Description != "" {
		fn(path, s.Description)
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		walkDescriptions(s.Properties[n], path+"."+n, fn)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkDescriptions(*s.Items.Schema, path+"[]", fn)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkDescriptions(*s.AdditionalProperties.Schema, path+"{}", fn)
	}
}

// TestShortNamesMatchTheCLI: the short names `trustplane get` accepts for trustplane's
// kinds are the CRDs' own, so `kubectl get kcr` works as `trustplane get kcr` does.
func TestShortNamesMatchTheCLI(t *testing.T) {
	want := map[string][]string{
		"jwksconfigs.jwks.trustplane.io":                     {"jwks"},
		"kubeconfigrequests.operator.kyma-project.io":        {"kcr"},
		"subscriptionrequests.control-plane.kyma-project.io": {"sr"},
		"secretchecksums.tengine.taobao.org":                 {"scs"},
		"ingresschecksums.tengine.taobao.org":                {"ics"},
	}
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, crd := range crds {
		names, ok := want[crd.Name]
		if !ok {
			continue
		}
		found++
		if !slices.Equal(crd.Spec.Names.ShortNames, names) {
			t.Errorf("%s: shortNames %v, want %v", crd.Name, crd.Spec.Names.ShortNames, names)
		}
	}
	if found != len(want) {
		t.Errorf("found %d of the %d CRDs: %s", found, len(want), strings.Join(crdNames(crds), ", "))
	}
}

func crdNames(crds []*apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, c := range crds {
		out = append(out, c.Name)
	}
	return out
}
