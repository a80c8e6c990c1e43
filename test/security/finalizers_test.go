package security

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("remove trustplane's finalizer to orphan what it cleans up", removeFinalizers)
}

// removeFinalizers: alice may update her JWKSConfig and her Cluster, but removing the
// manager's finalizer from either is refused by the shipped admission policy
// trustplane-finalizers, which names the finalizer; so deleting them leaves the manager
// to clean up (nginx objects, administrators' bindings) before they go.
func removeFinalizers(t *testing.T, alice *tenant) {
	jwksConfigIn(t, alice.client, alice.namespace, "held", "", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Nginx.Enabled = nil })
	bringAlong(t, alice, "held", kubeconfigFor("https://127.0.0.1:1", nil, "    token: anything"))
	for _, obj := range []client.Object{&jwksv1alpha1.JWKSConfig{}, &operatorv1alpha1.Cluster{}} {
		key := client.ObjectKey{Namespace: alice.namespace, Name: "held"}
		testenv.Eventually(t, "the manager's finalizer on her "+kindOf(obj), 30*time.Second, func() bool {
			return alice.client.Get(ctx, key, obj) == nil && len(obj.GetFinalizers()) > 0
		})
		held := obj.GetFinalizers()
		// Merge patches carry no resourceVersion: the manager's own writes meanwhile make
		// no conflict, so what answers is the admission policy.
		err := alice.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		if err == nil || !strings.Contains(err.Error(), "only the trustplane manager removes its finalizers ("+held[0]) {
			t.Errorf("removing %v from her %s: %v, want refused naming it", held, kindOf(obj), err)
		}
		// Anything else she may still change.
		if err := alice.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))); err != nil {
			t.Errorf("labelling her %s: %v", kindOf(obj), err)
		}
	}
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*jwksv1alpha1.JWKSConfig); ok {
		return "JWKSConfig"
	}
	return "Cluster"
}
