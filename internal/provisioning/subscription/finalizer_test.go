package subscription

import (
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestLegacyFinalizerIsHonoured: requests finalized by an earlier version carry
// "subscription.trustplane.io/release". A live one gets "subscription.trustplane.io/finalizer"
// in its place on its next reconcile; one deleted while it carried only the old name is
// released as before (its dedicated credential marked dirty) and goes.
func TestLegacyFinalizerIsHonoured(t *testing.T) {
	const legacy, current = "subscription.trustplane.io/release", "subscription.trustplane.io/finalizer"
	ns := namespace(t) // the pool's namespace, and the requests' (an operator's own)
	credential(t, ns, "aws-shared", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	credential(t, ns, "aws-acct1", map[string]string{"hyperscalerType": "aws", "tenantName": "acct1"})
	claimed := secret(t, ns, "aws-acct1")
	claimed.Annotations = map[string]string{cp.AnnotationClaimedBy: ns + "/going"}
	if err := env.Client.Update(ctx, claimed); err != nil {
		t.Fatal(err)
	}

	live := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live", Finalizers: []string{legacy}},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}}
	// Deleted before this version runs, holding the credential an earlier one assigned.
	going := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "going", Finalizers: []string{legacy}},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "globalaccount:acct1"}}
	for _, sr := range []*cp.SubscriptionRequest{live, going} {
		if err := env.Client.Create(ctx, sr); err != nil {
			t.Fatal(err)
		}
	}
	going.Status.GardenerSecretName = "aws-acct1"
	if err := env.Client.Status().Update(ctx, going); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, going); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(going), going); err != nil || going.DeletionTimestamp.IsZero() {
		t.Fatalf("the deleted request is not held by the legacy finalizer: %v, %+v", err, going.ObjectMeta)
	}

	start(t, ns)

	if got := waitReason(t, ns, "live", cp.ReasonAssigned); !slices.Equal(got.Finalizers, []string{current}) {
		t.Errorf("live request's finalizers %q, want %q in place of %q", got.Finalizers, current, legacy)
	}
	testenv.Eventually(t, "the request deleted with the legacy finalizer to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(going), &cp.SubscriptionRequest{}))
	})
	if l := secret(t, ns, "aws-acct1").Labels; l["dirty"] != "true" {
		t.Errorf("the credential of the request released under the legacy finalizer: labels %v, want dirty", l)
	}
}
