package kubeconfig

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
)

// TestOnlyAnIssuedGenerationHoldsExactlyItsSpec: the grants of an earlier spec are looked
// for unless Ready=True for this generation; a generation judged Stalled (a write refused)
// or revoked also advances observedGeneration, and is no such proof. Found by the chaos
// suite ("kubeconfig: granted as asked").
func TestOnlyAnIssuedGenerationHoldsExactlyItsSpec(t *testing.T) {
	refused := status.WriteFailed("create", &operatorv1alpha1.KubeconfigRequest{}, apierrors.NewForbidden(operatorv1alpha1.GroupVersion.WithResource("kubeconfigrequests").GroupResource(), "x", nil))
	for _, tc := range []struct {
		name string
		mark func(*status.Patcher, *operatorv1alpha1.KubeconfigRequest)
		want bool
	}{
		{"issued for this generation", func(_ *status.Patcher, kr *operatorv1alpha1.KubeconfigRequest) {
			status.MarkReady(kr, operatorv1alpha1.ReasonIssued, "")
		}, false},
		{"stalled for this generation", func(p *status.Patcher, _ *operatorv1alpha1.KubeconfigRequest) { p.Record(nil, refused) }, true},
		{"revoked for this generation", func(_ *status.Patcher, kr *operatorv1alpha1.KubeconfigRequest) {
			status.MarkNotReady(kr, operatorv1alpha1.ReasonRevoked, "")
		}, true},
		{"issued for the generation before", func(_ *status.Patcher, kr *operatorv1alpha1.KubeconfigRequest) {
			status.MarkReady(kr, operatorv1alpha1.ReasonIssued, "")
			kr.Generation++
		}, true},
		{"never reconciled", func(*status.Patcher, *operatorv1alpha1.KubeconfigRequest) {}, true},
	} {
		kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		tc.mark(status.NewPatcher(kr), kr)
		if got := mayHoldAnOldSpec(kr); got != tc.want {
			t.Errorf("%s (observedGeneration %d, generation %d): mayHoldAnOldSpec = %v, want %v", tc.name, kr.Status.ObservedGeneration, kr.Generation, got, tc.want)
		}
		if tc.name == "stalled for this generation" && kr.Status.ObservedGeneration != kr.Generation {
			t.Errorf("stalled: observedGeneration %d, generation %d: the case shows nothing", kr.Status.ObservedGeneration, kr.Generation)
		}
	}
}
