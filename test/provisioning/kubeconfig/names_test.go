package kubeconfig_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
)

// legacyName is the target name earlier versions gave a request: its readable part cut
// to 50 characters and 32 bits of the hash.
func legacyName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	base := "kcr-" + namespace + "-" + name
	if len(base) > 50 {
		base = base[:50]
	}
	return strings.TrimRight(base, "-.") + "-" + hex.EncodeToString(sum[:4])
}

// collidingNames finds two request names in namespace whose legacy target names are the
// same: long names share the readable part, and a birthday search finds a 32-bit
// collision after about 2^16 names.
func collidingNames(t *testing.T, namespace string) (string, string) {
	seen := map[string]string{}
	prefix := strings.Repeat("c", 48) + "-"
	for i := range 1 << 22 {
		name := prefix + strconv.Itoa(i)
		legacy := legacyName(namespace, name)
		if other, ok := seen[legacy]; ok {
			return other, name
		}
		seen[legacy] = name
	}
	t.Fatal("no collision found")
	return "", ""
}

// TestRequestsWhoseLegacyNamesCollideKeepApart: two requests whose target names under the
// earlier naming were the same (one ServiceAccount, each request overwriting the other's
// Role) each get their own ServiceAccount, Role and binding, recorded in status.targetName,
// and each token authenticates as its own ServiceAccount.
func TestRequestsWhoseLegacyNamesCollideKeepApart(t *testing.T) {
	setup(t)
	a, b := collidingNames(t, ns)
	t.Logf("legacy name of both %s and %s: %s", a, b, legacyName(ns, a))
	createAll(t, roleRequest(ns, a, "target"), roleRequest(ns, b, "target"))
	deletedAtTheEnd(t, a, b)
	users := map[string]bool{}
	for _, name := range []string{a, b} {
		kr := waitReady(t, name, metav1.ConditionTrue, "Issued")
		got := kr.Status.TargetName
		if got == "" || got == legacyName(ns, name) || len(got) > 63 {
			t.Errorf("%s: status.targetName %q", name, got)
		}
		sa := &corev1.ServiceAccount{}
		if err := target.Client.Get(ctx, client.ObjectKey{Namespace: kubeconfigctrl.TargetNamespace, Name: got}, sa); err != nil {
			t.Errorf("%s: its ServiceAccount %s: %v", name, got, err)
		} else if sa.Labels[kubeconfigctrl.RequestUIDLabel] != string(kr.UID) {
			t.Errorf("%s: ServiceAccount %s labelled for request %s", name, got, sa.Labels[kubeconfigctrl.RequestUIDLabel])
		}
		users[tokenUser(t, publishedKubeconfig(t, name))] = true
	}
	if len(users) != 2 {
		t.Errorf("the two tokens authenticate as %v, want two ServiceAccounts", users)
	}
}
