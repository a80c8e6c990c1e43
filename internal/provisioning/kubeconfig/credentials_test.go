package kubeconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
)

// boundKubeconfig is a status kubeconfig whose token is shaped as kube-apiserver issues
// one bound to Secret binding, with jti.
func boundKubeconfig(t *testing.T, binding, jti string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(map[string]any{"jti": jti, "kubernetes.io": map[string]any{"secret": map[string]any{"name": binding}}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := access.Kubeconfig("target", access.Endpoint{Server: "https://127.0.0.1:6443"}, "kcr", token)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// TestCredentialListFollowsTheCurrentOne: a request issued before status.credentials
// existed gets its current credential listed from its token, without a new issue; once
// its current credential is revoked by ID it is never listed again from the token, and a
// new issue is due; a prune forgets deleted and expired credentials only.
func TestCredentialListFollowsTheCurrentOne(t *testing.T) {
	issued, expires := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	kr := &operatorv1alpha1.KubeconfigRequest{Status: operatorv1alpha1.KubeconfigRequestStatus{
		Kubeconfig: boundKubeconfig(t, "kcr-default-reader-abcde", "6f1c"), IssuedAt: &metav1.Time{Time: issued}, ExpirationTimestamp: &metav1.Time{Time: expires}}}

	backfillCredentials(kr)
	want := operatorv1alpha1.IssuedCredential{ID: "JTI=6f1c", Binding: "kcr-default-reader-abcde", IssuedAt: metav1.Time{Time: issued}, ExpirationTimestamp: metav1.Time{Time: expires}}
	if len(kr.Status.Credentials) != 1 || kr.Status.Credentials[0] != want {
		t.Fatalf("backfilled %+v, want %+v", kr.Status.Credentials, want)
	}
	if currentRevoked(kr) {
		t.Error("a backfilled request is taken for revoked: every upgrade would re-issue")
	}

	// Revoked by ID: the list no longer holds it, and the token does not bring it back.
	kr.Status.Credentials, kr.Status.LastHandledRevokeCredential = nil, "JTI=6f1c"
	backfillCredentials(kr)
	if len(kr.Status.Credentials) != 0 || !currentRevoked(kr) {
		t.Errorf("after revoking the current credential: listed %+v, revoked %v", kr.Status.Credentials, currentRevoked(kr))
	}

	// A new issue is listed first; a prune forgets what it deleted and what expired.
	recordCredential(kr, "", "kcr-default-reader-fghij", expires, expires.Add(time.Hour))
	recordCredential(kr, "", "kcr-default-reader-klmno", expires, expires.Add(time.Hour))
	kr.Status.Credentials = append(kr.Status.Credentials, want)
	forgetCredentials(kr, []string{"kcr-default-reader-fghij"}, expires)
	if got := len(kr.Status.Credentials); got != 1 || kr.Status.Credentials[0].Binding != "kcr-default-reader-klmno" {
		t.Errorf("after the prune: %+v, want only kcr-default-reader-klmno", kr.Status.Credentials)
	}
}
