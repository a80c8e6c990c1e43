package version_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/trustplane/trustplane/internal/version"
)

// TestImageTagIsTheChartsAppVersion: make images tags with the chart's appVersion and the
// code (the JWKS nginx image's default, make run's sandbox image) with ImageTag; the
// chart, kustomize and both must agree, or a default names an image nobody built.
func TestImageTagIsTheChartsAppVersion(t *testing.T) {
	chart, err := os.ReadFile("../../charts/trustplane/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "([^"]+)"$`).FindSubmatch(chart)
	if m == nil || string(m[1]) != version.ImageTag {
		t.Fatalf("Chart.yaml appVersion %q, version.ImageTag %q", m, version.ImageTag)
	}
	for _, file := range []string{"../../config/default/kustomization.yaml", "../../config/node-agent/kustomization.yaml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "newTag: "+version.ImageTag) {
			t.Errorf("%s does not tag the images %s", file, version.ImageTag)
		}
	}
}
