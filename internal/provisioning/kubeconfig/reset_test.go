package kubeconfig

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// TestResetRotateKeepsTheSpecTheReconcileActsOn: the tenant edits the spec between the
// reconcile's read and its reset of the rotate annotation (injected here: the edit is
// written just before the patch reaches the API server). The patch's answer carries the
// new spec; the reconcile must go on with the spec it granted, or its status reports the
// new generation Ready with the old generation's grants. Found by the chaos suite.
func TestResetRotateKeepsTheSpecTheReconcileActsOn(t *testing.T) {
	ctx := context.Background()
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rotated",
		Annotations: map[string]string{operatorv1alpha1.RotateAnnotation: "true"}},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: "team-a", Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	if err := env.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	read := kr.DeepCopy()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	editFirst := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			edited := kr.DeepCopy()
			edited.Spec.Role.Namespace = "team-b"
			if err := c.Update(ctx, edited); err != nil {
				t.Fatal(err)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	if err := resetRotate(ctx, editFirst, read); err != nil {
		t.Fatal(err)
	}
	if read.Spec.Role.Namespace != "team-a" || read.Generation != kr.Generation || read.Annotations[operatorv1alpha1.RotateAnnotation] != "false" {
		t.Errorf("after the reset: role in %s, generation %d (read %d), rotate %q; want the spec as read and rotate false",
			read.Spec.Role.Namespace, read.Generation, kr.Generation, read.Annotations[operatorv1alpha1.RotateAnnotation])
	}
	stored := &operatorv1alpha1.KubeconfigRequest{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Annotations[operatorv1alpha1.RotateAnnotation] != "false" || stored.Spec.Role.Namespace != "team-b" {
		t.Errorf("stored: rotate %q, role in %s; want false and the tenant's edit kept", stored.Annotations[operatorv1alpha1.RotateAnnotation], stored.Spec.Role.Namespace)
	}
}
