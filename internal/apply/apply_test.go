package apply_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// TestApplyOwnsOnlyWhatIsSetAndReturnsTheAnswer: a typed object without TypeMeta is
// applied; fields set by another manager stay; obj then holds the server's answer
// (uid, resourceVersion, the other manager's fields).
func TestApplyOwnsOnlyWhatIsSetAndReturnsTheAnswer(t *testing.T) {
	ctx := context.Background()
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "applied"}, Data: map[string]string{"theirs": "1"}}
	if err := env.Client.Create(ctx, other, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "applied"}, Data: map[string]string{"mine": "2"}}
	if err := apply.Apply(ctx, env.Client, mine, "test-owner"); err != nil {
		t.Fatal(err)
	}
	if mine.UID == "" || mine.ResourceVersion == "" || mine.Data["theirs"] != "1" || mine.Data["mine"] != "2" {
		t.Errorf("obj after apply = %+v, want the server's answer with both managers' data", mine)
	}
	owners := map[string]bool{}
	for _, f := range mine.ManagedFields {
		owners[f.Manager] = true
	}
	if !owners["test-owner"] || !owners["someone-else"] {
		t.Errorf("managers %v, want both", owners)
	}
}
