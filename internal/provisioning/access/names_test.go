package access

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

func request(namespace, name string) *operatorv1alpha1.KubeconfigRequest {
	return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// New target names are label values and ServiceAccount names, keep 80 bits of the hash of
// an unambiguous "<namespace>/<name>", and differ where the readable part cannot tell the
// requests apart.
func TestNewTargetNamesAreUnambiguous(t *testing.T) {
	long := strings.Repeat("a", 240)
	for _, pair := range [][2]*operatorv1alpha1.KubeconfigRequest{
		{request("team", "prod-ci"), request("team-prod", "ci")},
		{request("t", long+"x"), request("t", long+"y")},
		{request(strings.Repeat("n", 63), "a.b"), request(strings.Repeat("n", 63), "a-b")},
	} {
		a, b := NewTargetName(pair[0]), NewTargetName(pair[1])
		if a == b {
			t.Errorf("%s/%s and %s/%s share %q", pair[0].Namespace, pair[0].Name, pair[1].Namespace, pair[1].Name, a)
		}
		for _, name := range []string{a, b} {
			if msgs := append(validation.IsValidLabelValue(name), validation.IsDNS1123Subdomain(name)...); len(msgs) > 0 || !strings.HasPrefix(name, "kcr-") {
				t.Errorf("%q: %v", name, msgs)
			}
			hash := name[strings.LastIndex(name, "-")+1:]
			if len(hash) != 16 || strings.Trim(hash, "abcdefghijklmnopqrstuvwxyz234567") != "" {
				t.Errorf("%q: hash part %q, want 16 base32 characters (80 bits)", name, hash)
			}
		}
	}
}

// The name a request holds its objects under is kept: recorded, or the legacy one of a
// request an earlier version served; a recorded name that is not one of the request's
// own is not honoured.
func TestTargetNameKeepsTheNameInUse(t *testing.T) {
	kr := request("team", "reader")
	fresh, legacy := NewTargetName(kr), LegacyTargetName(kr)
	if fresh == legacy || legacy != "kcr-team-reader-"+legacy[len(legacy)-8:] {
		t.Fatalf("new %q, legacy %q", fresh, legacy)
	}
	served := metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: operatorv1alpha1.ReasonIssued}
	for _, tc := range []struct {
		what     string
		recorded string
		stored   bool
		want     string
	}{
		{"a new request", "", false, fresh},
		{"served by an earlier version", "", true, legacy},
		{"recorded legacy", legacy, true, legacy},
		{"recorded new", fresh, true, fresh},
		{"another request's name", LegacyTargetName(request("team", "admin")), true, fresh},
		{"another request's name, no status else", NewTargetName(request("team", "admin")), false, fresh},
	} {
		kr := request("team", "reader")
		kr.Status.TargetName = tc.recorded
		if tc.stored {
			kr.Status.Conditions = []metav1.Condition{served}
		}
		if got := TargetName(kr); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
	}
}
