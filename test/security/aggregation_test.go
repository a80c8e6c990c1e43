package security

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("aggregate rules she does not hold into her Role", aggregateIntoOwnRole)
}

// aggregateIntoOwnRole: alice may write Roles in her namespace (the API server keeps their
// rules within hers) but not escalate; the annotation that would make the manager copy a
// platform Role's serviceaccounts/token into her Role is refused at admission, on create
// and on update, and neither Role changes.
func aggregateIntoOwnRole(t *testing.T, alice *tenant) {
	platform := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "platform-tokens", Labels: map[string]string{"tier": "platform"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}},
	}
	mustCreate(t, env.Client, platform)
	mine := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "mine",
			Annotations: map[string]string{roleaggregation.SelectorAnnotation: "tier=platform"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}
	// The policy was installed with config/default; the API server takes a moment to
	// load it.
	var err error
	testenv.Eventually(t, "the admission policy to refuse the annotation", 30*time.Second, func() bool {
		err = alice.client.Create(ctx, mine.DeepCopy())
		if err == nil {
			_ = env.Client.Delete(ctx, mine.DeepCopy())
		}
		return err != nil
	})
	if !strings.Contains(err.Error(), roleaggregation.SelectorAnnotation) || !strings.Contains(err.Error(), "escalate") {
		t.Errorf("refusal %q does not name the annotation and the right it needs", err)
	}

	plain := mine.DeepCopy()
	plain.Annotations = nil
	mustCreate(t, alice.client, plain)
	plain.Annotations = map[string]string{roleaggregation.SelectorAnnotation: "tier=platform"}
	if err := alice.client.Update(ctx, plain); err == nil {
		t.Error("adding the annotation to her Role was allowed")
	}
	got := &rbacv1.Role{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plain), got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[roleaggregation.SelectorAnnotation]; ok || len(got.Rules) != 1 {
		t.Errorf("her Role is %v with rules %v", got.Annotations, got.Rules)
	}
	unchanged(t, platform)
}
