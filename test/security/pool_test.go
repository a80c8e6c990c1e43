package security

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("put her cluster on another tenant's cloud account through the pool", poolFromHerNamespace)
}

// poolFromHerNamespace: a Secret in alice's namespace that looks like a pool credential
// (named like bob's binding) is never handed out: the pool is the operator's namespace
// only, so her request waits for the pool, and her Secret is not claimed.
func poolFromHerNamespace(t *testing.T, alice *tenant) {
	fake := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "bobs-binding",
		Labels: map[string]string{"hyperscalerType": "aws", "shared": "true"}}, StringData: map[string]string{"credentials": "bob's account"}}
	mustCreate(t, alice.client, fake)
	sr := &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "mine"},
		Spec: cp.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}}
	mustCreate(t, alice.client, sr)
	testenv.Eventually(t, "her request to wait for the operator's pool", 30*time.Second, func() bool {
		got := &cp.SubscriptionRequest{}
		if err := alice.client.Get(ctx, client.ObjectKeyFromObject(sr), got); err != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "Ready")
		return c != nil && c.Reason == cp.ReasonPoolExhausted && got.Status.GardenerSecretName == ""
	})
	unchanged(t, fake)
}
