package k8speers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/controller/certificates/approver"
	csrsigner "k8s.io/kubernetes/pkg/controller/certificates/signer"

	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestKubeControllerManagerApprovesWhatTheCeilingRefuses (issue 21): kube-controller-
// manager's own csrapproving and kubelet-client csrsigning controllers (v1.37.1, in
// process) approve and sign a client certificate for O=system:nodes, CN=system:node:worker-1
// requested by a user granted exactly the KubeconfigRequest rules, and one in its
// own node name for a user granted selfnodeclient: the grants trustplane's ceiling refuses
// as csr-nodeclient and csr-selfnodeclient. The same request from a user granted what the
// ceiling lets through stays pending.
func TestKubeControllerManagerApprovesWhatTheCeilingRefuses(t *testing.T) {
	csrRule := func(resources ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: resources, Verbs: []string{"create", "get"}}}
	}
	users := []struct {
		name, commonName string
		rules            []rbacv1.PolicyRule
		route            string // "" the ceiling lets it through: kube-controller-manager must not approve
	}{
		{"plain", "system:node:worker-1", csrRule("certificatesigningrequests"), ""},
		{"issue-21", "system:node:worker-1", csrRule("certificatesigningrequests", "certificatesigningrequests/nodeclient"), "csr-nodeclient"},
		{"system:node:worker-2", "system:node:worker-2", csrRule("certificatesigningrequests", "certificatesigningrequests/selfnodeclient"), "csr-selfnodeclient"},
	}
	for _, u := range users {
		denied := strings.Join(access.DefaultCeiling().Check(u.rules, ""), "; ")
		if u.route == "" && denied != "" || u.route != "" && !strings.Contains(denied, `route "`+u.route+`"`) {
			t.Errorf("ceiling on %s's rules: %q, want route %q", u.name, denied, u.route)
		}
	}

	kc := kubernetes.NewForConfigOrDie(env.Config)
	runCSRControllers(t, kc)
	// The approver handles plain's request before system:node:worker-2's, in creation and
	// in name order alike: once that one is signed, plain's has been decided.
	for _, u := range users {
		grant(t, u.name, u.rules)
		requestNodeClientCertificate(t, u.name, u.commonName)
	}

	for _, u := range users[1:] {
		var csr *certificatesv1.CertificateSigningRequest
		testenv.Eventually(t, u.name+"'s request signed", 60*time.Second, func() bool {
			var err error
			csr, err = kc.CertificatesV1().CertificateSigningRequests().Get(ctx, objectName(u.name), metav1.GetOptions{})
			return err == nil && len(csr.Status.Certificate) > 0
		})
		if !slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
			return c.Type == certificatesv1.CertificateApproved && c.Reason == "AutoApproved"
		}) {
			t.Errorf("%s: conditions %+v, want AutoApproved", u.name, csr.Status.Conditions)
		}
		block, _ := pem.Decode(csr.Status.Certificate)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.Subject.CommonName != u.commonName || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("%s was issued %s, want CN=%s, O=system:nodes", u.name, cert.Subject, u.commonName)
		}
	}
	plain, err := kc.CertificatesV1().CertificateSigningRequests().Get(ctx, objectName("plain"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Status.Conditions) != 0 || len(plain.Status.Certificate) != 0 {
		t.Errorf("the request of a user without nodeclient: %+v, want it pending", plain.Status)
	}
}

// runCSRControllers runs kube-controller-manager's csrapproving controller and its signer
// for kubernetes.io/kube-apiserver-client-kubelet (with a throwaway CA), one worker each.
func runCSRControllers(t *testing.T, kc kubernetes.Interface) {
	t.Helper()
	chain, err := testcerts.NewChain(mustKey(t), "csr-signer", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(caFile, testcerts.CertPEM(chain.CA), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, testcerts.KeyPEM(chain.CAKey), 0o600); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(kc, 0)
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	c, cancel := context.WithCancel(ctx)
	approving := approver.NewCSRApprovingController(c, kc, csrs)
	signing, err := csrsigner.NewKubeletClientCSRSigningController(c, kc, csrs, caFile, keyFile, time.Hour)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(c.Done())
	done := make(chan struct{}, 2)
	go func() { approving.Run(c, 1); done <- struct{}{} }()
	go func() { signing.Run(c, 1); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; factory.Shutdown() })
}

// grant binds a ClusterRole with rules to user, as an issued kubeconfig's would be.
func grant(t *testing.T, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	name := objectName(user)
	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}

// objectName names the ClusterRole, binding and CSR of user.
func objectName(user string) string { return "issue-21-" + strings.ReplaceAll(user, ":", "-") }

// requestNodeClientCertificate creates, as user, the CSR kubelet sends for its client
// certificate: O=system:nodes, CN=commonName, signer kube-apiserver-client-kubelet.
func requestNodeClientCertificate(t *testing.T, user, commonName string) {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: commonName, Organization: []string{"system:nodes"}}}, mustKey(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: objectName(user)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
	csrs := kubernetes.NewForConfigOrDie(cfg).CertificatesV1().CertificateSigningRequests()
	// The API server's authorizer learns of the new binding from a watch: Forbidden until then.
	testenv.Eventually(t, user+" allowed to create a CSR", 10*time.Second, func() bool {
		_, err = csrs.Create(ctx, csr, metav1.CreateOptions{})
		return !apierrors.IsForbidden(err)
	})
	if err != nil {
		t.Fatalf("%s creating a CSR: %v", user, err)
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
