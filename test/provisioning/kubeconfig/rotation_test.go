package kubeconfig_test

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestCredentialTheStatusNamesOutlivesLostRotations: a rotation whose status write is
// lost (the manager killed between issuing and writing the status, the API server down)
// has published its credential in the Secret only; the status still names the one before.
// A second rotation then prunes bindings, and must not prune the one of the credential the
// status names: what a request reports issued works. Found by the chaos suite
// (test/chaos, "kubeconfig: issued works": a leader killed between two steps). Here a
// ValidatingAdmissionPolicy refuses every status write of the request after its first.
func TestCredentialTheStatusNamesOutlivesLostRotations(t *testing.T) {
	setup(t)
	const name = "rotated-unrecorded"
	createAll(t, roleRequest(ns, name, "target"))
	deletedAtTheEnd(t, name)
	// Not used before the end: the target caches a successful authentication for 10 s,
	// which would hide a deleted binding.
	first := waitReady(t, name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued).Status.Kubeconfig

	lift := refuseStatus(t, name, "false")
	defer lift()
	published := []string{first}
	for rotation := 1; rotation <= 2; rotation++ {
		patchAnnotation(t, name, operatorv1alpha1.RotateAnnotation, "true")
		testenv.Eventually(t, "a rotation published in the Secret only", 30*time.Second, func() bool {
			kr := &operatorv1alpha1.KubeconfigRequest{}
			if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
				t.Fatal(err)
			}
			now := publishedKubeconfig(t, name)
			return kr.Annotations[operatorv1alpha1.RotateAnnotation] == "false" && !slices.Contains(published, now)
		})
		published = append(published, publishedKubeconfig(t, name))
	}
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
		t.Fatal(err)
	}
	if kr.Status.Kubeconfig != first {
		t.Fatal("a status write got through the policy: the test shows nothing")
	}
	// Both the credential the status names and the one the Secret publishes work; the
	// status write that would name the latter was lost, and the next rotation replaces both.
	want := "system:serviceaccount:" + kubeconfigctrl.TargetNamespace + ":kcr-" + ns + "-" + name + "-"
	for what, kubeconfig := range map[string]string{"the status names": first, "the Secret publishes": published[len(published)-1]} {
		if user := tokenUser(t, kubeconfig); !strings.HasPrefix(user, want) {
			t.Errorf("the credential %s authenticates as %q after two rotations with lost status writes, want %s...", what, user, want)
		}
	}
}

// publishedKubeconfig is the kubeconfig in the request's published Secret, base64 as the
// status has it.
func publishedKubeconfig(t *testing.T, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(secret.Data["kubeconfig"])
}

// tokenUser is who the target authenticates the token of a status kubeconfig as, "" when
// it rejects it.
func tokenUser(t *testing.T, kubeconfig string) string {
	t.Helper()
	user, _ := reviewToken(t, kubeconfig)
	return user
}
