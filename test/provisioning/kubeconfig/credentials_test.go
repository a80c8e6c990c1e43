package kubeconfig_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// targetAuditPolicy logs, at Metadata level, what the issued credentials do in the
// target and the TokenRequests that issue them: what an operator tracing a credential
// would log (docs/provisioning.md, "Traceable credentials").
const targetAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:` + kubeconfigctrl.TargetNamespace + `"]
- level: Metadata
  resources: [{group: "", resources: ["serviceaccounts/token"]}]
- level: None
`

// targetAuditLog is the target API server's audit log.
var targetAuditLog string

// withAuditLog has the target API server log to dir/audit.log with targetAuditPolicy.
func withAuditLog(dir string) ([]testenv.Option, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(targetAuditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	targetAuditLog = filepath.Join(dir, "audit.log")
	return []testenv.Option{testenv.WithAPIServerFlag("audit-policy-file", policy), testenv.WithAPIServerFlag("audit-log-path", targetAuditLog)}, nil
}

// auditEvent is what the test reads of an audit event.
type auditEvent struct {
	Verb        string            `json:"verb"`
	RequestURI  string            `json:"requestURI"`
	Annotations map[string]string `json:"annotations"`
	User        struct {
		Extra map[string][]string `json:"extra"`
	} `json:"user"`
}

// audited are the target's audit events: the requests each credential ID authenticated
// (verb and URI), and the IDs TokenRequests issued.
func audited(t *testing.T) (used map[string][]string, issued []string) {
	t.Helper()
	f, err := os.Open(targetAuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used = map[string][]string{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if id := e.Annotations["authentication.kubernetes.io/issued-credential-id"]; id != "" {
			issued = append(issued, id)
		}
		for _, id := range e.User.Extra["authentication.kubernetes.io/credential-id"] {
			used[id] = append(used[id], e.Verb+" "+e.RequestURI)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return used, issued
}

// reviewToken is what the target says of the token of a status kubeconfig: who, and
// which credential ID ("" when it refuses the token).
func reviewToken(t *testing.T, kubeconfig string) (user, credentialID string) {
	t.Helper()
	return testenv.ReviewKubeconfigToken(t, target.Client, kubeconfig)
}

// credentialIDs are the IDs status.credentials lists, newest first.
func credentialIDs(kr *operatorv1alpha1.KubeconfigRequest) []string {
	var ids []string
	for _, c := range kr.Status.Credentials {
		ids = append(ids, c.ID)
	}
	return ids
}

// waitCredentials waits until the request lists want (IDs, newest first; "*" for an ID
// not known yet) and is Ready, and returns it.
func waitCredentials(t *testing.T, name string, want ...string) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	var kr *operatorv1alpha1.KubeconfigRequest
	testenv.Eventually(t, fmt.Sprintf("credentials %v", want), 30*time.Second, func() bool {
		kr = waitReady(t, name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
		ids := credentialIDs(kr)
		return slices.EqualFunc(ids, want, func(got, w string) bool { return w == "*" && got != "" || got == w })
	})
	return kr
}

// TestCredentialsAreTraceable: each credential issued for a request is listed in its
// status by the ID kube-apiserver gives its token: the target's TokenReview and its audit
// log name the same ID for the requests the credential made, and the TokenRequest that
// issued it. One credential is revoked by ID: the target refuses its token while the
// other stays valid; revoking the current one issues a new kubeconfig; an unknown ID
// revokes nothing and says so.
func TestCredentialsAreTraceable(t *testing.T) {
	setup(t)
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "traced"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
	if err := mgmt.Client.Create(ctx, kr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, kr) })
	first := waitCredentials(t, kr.Name, "*")
	firstID, firstKubeconfig := first.Status.Credentials[0].ID, first.Status.Kubeconfig
	if !strings.HasPrefix(firstID, "JTI=") || strings.Contains(firstID, ".") {
		t.Fatalf("credential ID %q, want JTI=<jti>", firstID)
	}
	if c := first.Status.Credentials[0]; !c.ExpirationTimestamp.Equal(first.Status.ExpirationTimestamp) || !c.IssuedAt.Equal(first.Status.IssuedAt) {
		t.Errorf("credential %+v, status issuedAt %v expires %v", c, first.Status.IssuedAt, first.Status.ExpirationTimestamp)
	}

	patchAnnotation(t, kr.Name, operatorv1alpha1.RotateAnnotation, "true")
	second := waitCredentials(t, kr.Name, "*", firstID)
	secondID := second.Status.Credentials[0].ID
	for id, kubeconfig := range map[string]string{firstID: firstKubeconfig, secondID: second.Status.Kubeconfig} {
		if _, reviewed := reviewToken(t, kubeconfig); reviewed != id {
			t.Errorf("the target names the credential listed as %s %q", id, reviewed)
		}
		if _, err := clientFrom(t, &operatorv1alpha1.KubeconfigRequest{Status: operatorv1alpha1.KubeconfigRequestStatus{Kubeconfig: kubeconfig}}).
			CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("listing namespaces with credential %s: %v", id, err)
		}
	}
	testenv.Eventually(t, "both credentials in the target's audit log", 30*time.Second, func() bool {
		used, issued := audited(t)
		for _, id := range []string{firstID, secondID} {
			listed := slices.ContainsFunc(used[id], func(r string) bool { return strings.HasPrefix(r, "list /api/v1/namespaces") })
			if !slices.Contains(issued, id) || !listed {
				return false
			}
		}
		return true
	})

	// The older one, by ID: refused, while the current one still works.
	patchAnnotation(t, kr.Name, operatorv1alpha1.RevokeCredentialAnnotation, firstID)
	revoked := waitCredentials(t, kr.Name, secondID)
	if revoked.Status.LastHandledRevokeCredential != firstID || revoked.Status.Kubeconfig != second.Status.Kubeconfig {
		t.Errorf("after revoking the older credential: handled %q, kubeconfig replaced %v", revoked.Status.LastHandledRevokeCredential, revoked.Status.Kubeconfig != second.Status.Kubeconfig)
	}
	waitEvent(t, ns, kr.Name, operatorv1alpha1.ReasonCredentialRevoked, "revoked credential "+firstID)
	testenv.Eventually(t, "the revoked credential refused", 30*time.Second, func() bool {
		user, _ := reviewToken(t, firstKubeconfig)
		return user == ""
	})
	if _, id := reviewToken(t, second.Status.Kubeconfig); id != secondID {
		t.Errorf("the current credential after revoking the older one: %q", id)
	}

	// The current one, by ID: a new kubeconfig at once, and the old one refused.
	patchAnnotation(t, kr.Name, operatorv1alpha1.RevokeCredentialAnnotation, secondID)
	var third *operatorv1alpha1.KubeconfigRequest
	testenv.Eventually(t, "a new credential for the revoked current one", 30*time.Second, func() bool {
		third = waitReady(t, kr.Name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
		return third.Status.LastHandledRevokeCredential == secondID
	})
	if len(third.Status.Credentials) != 1 || third.Status.Credentials[0].ID == secondID || third.Status.Kubeconfig == second.Status.Kubeconfig {
		t.Fatalf("revoking the current credential: %+v", third.Status.Credentials)
	}
	waitEvent(t, ns, kr.Name, operatorv1alpha1.ReasonCredentialRevoked, "it was the current one")
	testenv.Eventually(t, "the revoked current credential refused", 30*time.Second, func() bool {
		user, _ := reviewToken(t, second.Status.Kubeconfig)
		return user == ""
	})
	if _, id := reviewToken(t, third.Status.Kubeconfig); id != third.Status.Credentials[0].ID {
		t.Errorf("the new credential: target says %q, status %q", id, third.Status.Credentials[0].ID)
	}

	// An ID the request never had: nothing revoked, a Warning event lists the live ones.
	patchAnnotation(t, kr.Name, operatorv1alpha1.RevokeCredentialAnnotation, "JTI=not-a-credential")
	testenv.Eventually(t, "a CredentialNotFound event", 30*time.Second, func() bool {
		for _, e := range warningEvents(t, ns, kr.Name, operatorv1alpha1.ReasonCredentialNotFound) {
			if strings.Contains(e.Note, third.Status.Credentials[0].ID) {
				return true
			}
		}
		return false
	})
	if got := waitCredentials(t, kr.Name, third.Status.Credentials[0].ID); got.Status.Kubeconfig != third.Status.Kubeconfig {
		t.Error("an unknown ID changed the kubeconfig")
	}
	if user, _ := reviewToken(t, third.Status.Kubeconfig); user == "" {
		t.Error("an unknown ID revoked the current credential")
	}

	// A value no status could hold (4 KiB; status.lastHandledRevokeCredential admits 256
	// characters): handled all the same, recorded as its hash, and the request's status is
	// still written.
	huge := "JTI=" + strings.Repeat("x", 4096)
	patchAnnotation(t, kr.Name, operatorv1alpha1.RevokeCredentialAnnotation, huge)
	testenv.Eventually(t, "the huge value handled and the status written", 30*time.Second, func() bool {
		got := waitReady(t, kr.Name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
		return strings.HasPrefix(got.Status.LastHandledRevokeCredential, "sha256:") && got.Status.Kubeconfig == third.Status.Kubeconfig
	})

	// Rotations: the list is capped, and is exactly the bindings live in the target.
	for i := range 3 {
		before := waitReady(t, kr.Name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued).Status.Credentials[0].ID
		patchAnnotation(t, kr.Name, operatorv1alpha1.RotateAnnotation, "true")
		testenv.Eventually(t, fmt.Sprintf("rotation %d", i+1), 30*time.Second, func() bool {
			return waitReady(t, kr.Name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued).Status.Credentials[0].ID != before
		})
	}
	rotated := waitReady(t, kr.Name, metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	if n := len(rotated.Status.Credentials); n > operatorv1alpha1.MaxLiveCredentials {
		t.Errorf("%d credentials listed after rotations, want at most %d", n, operatorv1alpha1.MaxLiveCredentials)
	}
	bindings := &corev1.SecretList{}
	if err := target.Client.List(ctx, bindings, client.InNamespace(kubeconfigctrl.TargetNamespace), client.MatchingLabels{kubeconfigctrl.RequestLabel: rotated.Status.TargetName}); err != nil {
		t.Fatal(err)
	}
	var live, listed []string
	for _, b := range bindings.Items {
		live = append(live, b.Name)
	}
	for _, c := range rotated.Status.Credentials {
		listed = append(listed, c.Binding)
	}
	slices.Sort(live)
	slices.Sort(listed)
	if !slices.Equal(live, listed) {
		t.Errorf("token bindings in the target %v, listed %v", live, listed)
	}
}

// TestARevokeNeverReachesAnotherRequestsCredential: a status forged (as its author could
// without the admission policy trustplane-status-writers) to list another request's token
// binding under a made-up ID, then that ID revoked: the other request's binding and token
// stay, the forged entry leaves the list, and a Warning event says it was not this
// request's.
func TestARevokeNeverReachesAnotherRequestsCredential(t *testing.T) {
	setup(t)
	rules := []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}
	var requests []*operatorv1alpha1.KubeconfigRequest
	for _, name := range []string{"forger", "victim"} {
		kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: rules}}}
		if err := mgmt.Client.Create(ctx, kr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, kr) })
		requests = append(requests, waitCredentials(t, name, "*"))
	}
	forger, victim := requests[0], requests[1]
	victimBinding := victim.Status.Credentials[0].Binding

	before := forger.DeepCopy()
	forger.Status.Credentials = append(forger.Status.Credentials, operatorv1alpha1.IssuedCredential{ID: "JTI=forged", Binding: victimBinding,
		IssuedAt: *victim.Status.IssuedAt, ExpirationTimestamp: *victim.Status.ExpirationTimestamp})
	if err := mgmt.Client.Status().Patch(ctx, forger, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, forger.Name, operatorv1alpha1.RevokeCredentialAnnotation, "JTI=forged")
	testenv.Eventually(t, "a Warning event for the forged entry", 30*time.Second, func() bool {
		for _, e := range warningEvents(t, ns, forger.Name, operatorv1alpha1.ReasonCredentialNotFound) {
			if strings.Contains(e.Note, "not this request's") {
				return true
			}
		}
		return false
	})
	if got := waitCredentials(t, forger.Name, forger.Status.Credentials[0].ID); got.Status.LastHandledRevokeCredential != "JTI=forged" {
		t.Errorf("forger after the revoke: %+v", got.Status)
	}
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: kubeconfigctrl.TargetNamespace, Name: victimBinding}, &corev1.Secret{}); err != nil {
		t.Errorf("the victim's token binding: %v", err)
	}
	if user, id := reviewToken(t, victim.Status.Kubeconfig); user == "" || id != victim.Status.Credentials[0].ID {
		t.Errorf("the victim's token after the forger's revoke: user %q, credential %q", user, id)
	}
}
