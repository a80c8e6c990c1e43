package gardenstandin

import (
	"strings"
	"testing"

	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// Gardener's length rule for new Shoots, as the stand-in plays it: trustplane's Shoot
// names fit a project name of up to 6 characters.
func TestShootNameTooLong(t *testing.T) {
	name := shoot.Name("team", "prod")
	for _, tc := range []struct {
		namespace, name string
		refused         bool
	}{
		{"garden-test", name, false},
		{"garden-kyma42", name, false}, // 6 + 15 = 21
		{"garden-kyma-dev", name, true},
		{"garden-kyma-dev", shoot.LegacyName("team", "prod"), false},
		{"garden-" + strings.Repeat("p", 21), "c", true},
	} {
		message := ShootNameTooLong(tc.namespace, tc.name)
		if (message != "") != tc.refused {
			t.Errorf("%s/%s: %q, refused want %v", tc.namespace, tc.name, message, tc.refused)
		}
	}
}
