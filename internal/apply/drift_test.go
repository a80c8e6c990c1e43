package apply_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/apply"
)

func desiredDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "drift"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "drift"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "nginx",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					// "0.5" comes back from the API server as "500m": not a difference.
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}},
				}}},
			},
		},
	}
}

// TestDriftedSeesOnlyChangesToOwnedFields: right after an apply nothing has drifted (the
// API server's defaults and canonical quantities included); another manager's change to an
// owned field is drift; a field of its own is not.
func TestDriftedSeesOnlyChangesToOwnedFields(t *testing.T) {
	ctx := context.Background()
	const owner = "drift-owner"
	if err := apply.Apply(ctx, env.Client, desiredDeployment(), owner); err != nil {
		t.Fatal(err)
	}
	current := &appsv1.Deployment{}
	get := func() *appsv1.Deployment {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "drift"}, current); err != nil {
			t.Fatal(err)
		}
		return current
	}
	check := func(step string, want bool) {
		t.Helper()
		got, err := apply.Drifted(env.Client, get(), desiredDeployment(), owner)
		if err != nil || got != want {
			t.Errorf("%s: drifted = %v (%v), want %v", step, got, err, want)
		}
	}
	check("right after the apply", false)

	get().Labels = map[string]string{"team": "theirs"}
	if err := env.Client.Update(ctx, current, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	check("another manager's own label", false)

	get().Spec.Replicas = ptr.To[int32](5)
	if err := env.Client.Update(ctx, current, client.FieldOwner("kubectl-scale")); err != nil {
		t.Fatal(err)
	}
	check("replicas changed by another manager", true)

	if err := apply.Apply(ctx, env.Client, desiredDeployment(), owner); err != nil {
		t.Fatal(err)
	}
	check("after applying again", false)

	changed := desiredDeployment()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	if got, err := apply.Drifted(env.Client, get(), changed, owner); err != nil || !got {
		t.Errorf("a new desired image: drifted = %v (%v), want true", got, err)
	}
	if _, err := apply.Drifted(env.Client, &corev1.Secret{}, &corev1.Secret{}, owner); err == nil {
		t.Error("a kind it cannot extract is not an error")
	}
}

// TestPlainCreateCountsAsOwned: an object its owner made with a plain create, never
// applied since, has not drifted from what was created; another manager's change to one
// of its fields is drift; after an apply, the apply's fields are what count.
func TestPlainCreateCountsAsOwned(t *testing.T) {
	ctx := context.Background()
	const owner = "create-owner"
	desired := func(doc string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "created", Labels: map[string]string{"app": "created"},
				Annotations: map[string]string{"note": "n"}},
			Data: map[string]string{"doc": doc}}
	}
	if err := env.Client.Create(ctx, desired("one"), client.FieldOwner(owner)); err != nil {
		t.Fatal(err)
	}
	current := &corev1.ConfigMap{}
	get := func() *corev1.ConfigMap {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "created"}, current); err != nil {
			t.Fatal(err)
		}
		return current
	}
	check := func(step, doc string, want bool) {
		t.Helper()
		got, err := apply.Drifted(env.Client, get(), desired(doc), owner)
		if err != nil || got != want {
			t.Errorf("%s: drifted = %v (%v), want %v", step, got, err, want)
		}
	}
	if !apply.WrittenBy(get(), owner) || apply.WrittenBy(current, "someone") {
		t.Errorf("WrittenBy after a create: managed fields %+v", current.ManagedFields)
	}
	check("right after the create", "one", false)
	check("a new desired document", "two", true)

	get().Data["doc"] = "forged"
	if err := env.Client.Update(ctx, current, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	check("the document changed by another manager", "one", true)

	if err := apply.Apply(ctx, env.Client, desired("two"), owner); err != nil {
		t.Fatal(err)
	}
	check("after an apply", "two", false)
	get().Annotations["note"] = "changed"
	if err := env.Client.Update(ctx, current, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	check("an applied annotation changed by another manager", "two", true)
}
