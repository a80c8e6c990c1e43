package shoot

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// liveShoot is a Shoot whose last operation is opType/state with the given last errors,
// each a description and its codes.
func liveShoot(opType, state string, errs ...[]string) *unstructured.Unstructured {
	var lastErrors []any
	for _, e := range errs {
		codes := make([]any, 0, len(e)-1)
		for _, c := range e[1:] {
			codes = append(codes, c)
		}
		lastErrors = append(lastErrors, map[string]any{"description": e[0], "taskID": "deploy-infra", "codes": codes, "lastUpdateTime": "2026-11-30T10:00:00Z"})
	}
	status := map[string]any{"lastOperation": map[string]any{"type": opType, "state": state, "progress": int64(40),
		"description": "reconciling", "lastUpdateTime": "2026-11-30T10:00:01Z"}}
	if lastErrors != nil {
		status["lastErrors"] = lastErrors
	}
	return &unstructured.Unstructured{Object: map[string]any{"status": status}}
}

// TestFailureOfFollowsGardenersRetries: an operation that failed with a code Gardener
// does not retry, or Failed with no error reported, stalls the Cluster and names the
// codes; one that failed with retryable codes only is retried; one under way or done is
// no failure.
func TestFailureOfFollowsGardenersRetries(t *testing.T) {
	for _, tc := range []struct {
		name              string
		shoot             *unstructured.Unstructured
		stalled, retrying bool
		message           string
	}{
		{"unauthorized", liveShoot("Create", "Failed", []string{"AccessDenied", "ERR_INFRA_UNAUTHORIZED"}), true, false, "Gardener does not retry ERR_INFRA_UNAUTHORIZED: AccessDenied"},
		{"quota, still in Error", liveShoot("Create", "Error", []string{"quota", "ERR_INFRA_QUOTA_EXCEEDED"}), true, false, "ERR_INFRA_QUOTA_EXCEEDED"},
		{"configuration among others", liveShoot("Reconcile", "Error", []string{"a", "ERR_RETRYABLE_INFRA_DEPENDENCIES"}, []string{"b", "ERR_CONFIGURATION_PROBLEM"}), true, false, "Gardener does not retry ERR_CONFIGURATION_PROBLEM: a; b"},
		{"retryable only", liveShoot("Create", "Error", []string{"depleted", "ERR_INFRA_RESOURCES_DEPLETED"}), false, true, "ERR_INFRA_RESOURCES_DEPLETED (retried): depleted"},
		{"failed with retryable codes", liveShoot("Create", "Failed", []string{"depleted", "ERR_INFRA_RESOURCES_DEPLETED"}), false, true, "(retried)"},
		{"failed, nothing reported", liveShoot("Create", "Failed"), true, false, "Gardener gave the shoot up: Create failed (40%): reconciling"},
		{"error, nothing reported", liveShoot("Create", "Error"), false, true, "Create error (40%)"},
		{"under way with old errors", liveShoot("Create", "Processing", []string{"x", "ERR_INFRA_UNAUTHORIZED"}), false, false, ""},
		{"succeeded", liveShoot("Reconcile", "Succeeded"), false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FailureOf(tc.shoot)
			if f.Stalled != tc.stalled || f.Retrying != tc.retrying || !strings.Contains(f.Message, tc.message) {
				t.Errorf("FailureOf = %+v, want stalled %v, retrying %v, a message containing %q", f, tc.stalled, tc.retrying, tc.message)
			}
		})
	}
}

// TestStatusOfMirrorsTheShoot: the last operation and errors reach the Cluster's status
// as Gardener wrote them, descriptions cut to what the status keeps.
func TestStatusOfMirrorsTheShoot(t *testing.T) {
	long := strings.Repeat("é", 2000)
	op, errs := StatusOf(liveShoot("Create", "Failed", []string{"denied", "ERR_INFRA_UNAUTHORIZED", "ERR_CONFIGURATION_PROBLEM"}, []string{long}))
	if op == nil || op.Type != "Create" || op.State != "Failed" || op.Progress != 40 || op.Description != "reconciling" || op.LastUpdateTime == nil ||
		op.LastUpdateTime.UTC().Format("15:04:05") != "10:00:01" {
		t.Errorf("last operation %+v", op)
	}
	if len(errs) != 2 || errs[0].Description != "denied" || errs[0].TaskID != "deploy-infra" || strings.Join(errs[0].Codes, ",") != "ERR_INFRA_UNAUTHORIZED,ERR_CONFIGURATION_PROBLEM" || errs[0].LastUpdateTime == nil {
		t.Fatalf("last errors %+v", errs)
	}
	if d := errs[1].Description; len([]rune(d)) > maxMirrored || !strings.HasSuffix(d, "...") || !strings.HasPrefix(d, "éé") {
		t.Errorf("a long description kept as %d runes (%q...)", len([]rune(d)), d[:10])
	}
	if op, errs := StatusOf(&unstructured.Unstructured{Object: map[string]any{}}); op != nil || errs != nil {
		t.Errorf("a Shoot without status mirrored as %+v, %+v", op, errs)
	}
}
