package podcert_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestSPIFFEFolderVerifiesWithGoSPIFFE (issue 43): the node agent as shipped (the built
// binary, the DaemonSet's args, its own pod-bound token) with --layout=spiffe writes two
// pods' SPIFFE credential folders, and go-spiffe, as a peer would, takes them: the leaf
// and its bundle pass X.509-SVID parsing and verification, mutual TLS between the two
// pods' credentials succeeds under AuthorizeID and is refused for an identity the
// authorizer does not allow, and a leaf of another CA is refused. A federated bundle
// created and deleted reaches the folders through the agent's watch (its refresh pass is
// an hour away), as a file added and removed.
func TestSPIFFEFolderVerifiesWithGoSPIFFE(t *testing.T) {
	ns := env.Namespace(t, "spiffe")
	const node = "node-spiffe"
	agent := testenv.Rendered(t, "config/node-agent")
	env.Install(t, agent)
	objs := []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}
	for _, sa := range []string{"client", "server"} {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
		pod := annotatedPod(ns, sa, node, signer, "")
		pod.Spec.ServiceAccountName = sa
		objs = append(objs, pod)
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace = ns
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })

	dir := t.TempDir()
	startShippedAgent(t, agent, node, dir,
		"--layout="+nodeagent.LayoutSPIFFE,
		// No refresh pass during the test: a changed bundle must come through the watch.
		"--refresh-interval=1h")

	td := spiffeid.RequireTrustDomainFromString(signerOpts.TrustDomain)
	trustFile := td.Name() + nodeagent.TrustBundleSuffix
	clientID := spiffeid.RequireFromPath(td, "/ns/"+ns+"/sa/client")
	serverID := spiffeid.RequireFromPath(td, "/ns/"+ns+"/sa/server")
	someoneElse := spiffeid.RequireFromPath(td, "/ns/"+ns+"/sa/someone-else")
	folders := map[string]string{}
	for _, pod := range []string{"client", "server"} {
		folders[pod] = waitSPIFFEFolder(t, dir, ns, pod, trustFile)
	}

	// go-spiffe's reading of each folder: the trust bundle, the SVID from the one
	// credential bundle file (key and certificates), and its verification to an ID.
	svids := map[string]*x509svid.SVID{}
	var bundle *x509bundle.Bundle
	for pod, folder := range folders {
		checkSPIFFEFiles(t, folder, trustFile)
		b, err := x509bundle.Load(td, filepath.Join(folder, trustFile))
		if err != nil {
			t.Fatalf("go-spiffe: x509bundle.Load of %s's %s: %v", pod, trustFile, err)
		}
		credential := filepath.Join(folder, nodeagent.SPIFFECredentialBundleFile)
		svid, err := x509svid.Load(credential, credential)
		if err != nil {
			t.Fatalf("go-spiffe: x509svid.Load of %s's %s: %v", pod, nodeagent.SPIFFECredentialBundleFile, err)
		}
		id, _, err := x509svid.Verify(svid.Certificates, b)
		if err != nil {
			t.Fatalf("go-spiffe: x509svid.Verify of %s's SVID: %v", pod, err)
		}
		if want := map[string]spiffeid.ID{"client": clientID, "server": serverID}[pod]; id != want || svid.ID != want {
			t.Fatalf("go-spiffe: %s's SVID is %s (verified %s), want %s", pod, svid.ID, id, want)
		}
		t.Logf("go-spiffe: x509svid.Verify ok %s", id)
		svids[pod], bundle = svid, b
	}

	// Mutual TLS between the two pods' credentials under go-spiffe's authorizers.
	serverErr, clientErr := exchangeOverMTLS(t,
		tlsconfig.MTLSServerConfig(svids["server"], bundle, tlsconfig.AuthorizeID(clientID)),
		tlsconfig.MTLSClientConfig(svids["client"], bundle, tlsconfig.AuthorizeID(serverID)))
	if serverErr != nil || clientErr != nil {
		t.Fatalf("go-spiffe: mTLS AuthorizeID(client)/AuthorizeID(server): server %v, client %v", serverErr, clientErr)
	}
	t.Logf("go-spiffe: mTLS AuthorizeID(%s) ok (server authorized the client), AuthorizeID(%s) ok (client authorized the server), a byte each way", clientID, serverID)

	serverErr, clientErr = exchangeOverMTLS(t,
		tlsconfig.MTLSServerConfig(svids["server"], bundle, tlsconfig.AuthorizeID(someoneElse)),
		tlsconfig.MTLSClientConfig(svids["client"], bundle, tlsconfig.AuthorizeID(serverID)))
	// go-spiffe's own refusal, word for word: its authorizer turned the client's ID away,
	// not some other failure of the handshake.
	wantRefusal := tlsconfig.AuthorizeID(someoneElse)(clientID, nil)
	if serverErr == nil || wantRefusal == nil || serverErr.Error() != wantRefusal.Error() {
		t.Fatalf("go-spiffe: mTLS AuthorizeID(%s) on the server: %v, want the authorizer's refusal %v", someoneElse, serverErr, wantRefusal)
	}
	if clientErr == nil {
		t.Fatal("the client exchanged a byte with a server that refused it")
	}
	t.Logf("go-spiffe: mTLS AuthorizeID(%s): refused: %v (client saw: %v)", someoneElse, serverErr, clientErr)

	// A leaf claiming the client's ID from another CA is not verified by the bundle.
	otherCA := newCA(t, "another CA")
	forged := otherCA.issue(t, clientID.String())
	_, _, err := x509svid.Verify([]*x509.Certificate{forged}, bundle)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("go-spiffe: x509svid.Verify of a leaf of another CA: %v, want x509: certificate signed by unknown authority", err)
	}
	t.Logf("go-spiffe: x509svid.Verify of a leaf from another CA: refused: %v", err)

	// Federation through the watch: a bundle of another peer trust domain for the same
	// signer and workload trust domain becomes a file in both folders; deleted, it goes.
	federated := &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Replace(signer, "/", ":", 1) + ":federated-" + ns, Labels: map[string]string{
			certificates.LabelCanarying: certificates.LabelCanaryingLive, certificates.LabelWorkloadTrustDomain: td.Name(),
			certificates.LabelPeerTrustDomain: "other.example"}},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherCA.cert.Raw}))},
	}
	if err := env.Client.Create(ctx, federated); err != nil {
		t.Fatal(err)
	}
	federatedFile := "other.example" + nodeagent.TrustBundleSuffix
	for pod, folder := range folders {
		testenv.Eventually(t, federatedFile+" in "+pod+"'s folder", 30*time.Second, func() bool {
			raw, err := os.ReadFile(filepath.Join(folder, federatedFile))
			return err == nil && bytes.Equal(raw, []byte(federated.Spec.TrustBundle))
		})
	}
	if err := env.Client.Delete(ctx, federated); err != nil {
		t.Fatal(err)
	}
	for pod, folder := range folders {
		testenv.Eventually(t, federatedFile+" removed from "+pod+"'s folder", 30*time.Second, func() bool {
			_, err := os.Lstat(filepath.Join(folder, federatedFile))
			return errors.Is(err, os.ErrNotExist)
		})
		if _, err := os.Stat(filepath.Join(folder, trustFile)); err != nil {
			t.Errorf("%s's own trust bundle went with the federated one: %v", pod, err)
		}
	}
}

// waitSPIFFEFolder waits for pod's credential folder to hold its credential bundle and a
// trust bundle that verifies it (the signer publishes its bundle as it starts; a bundle
// another test's signer left may be there before), and returns the folder.
func waitSPIFFEFolder(t *testing.T, dir, ns, pod, trustFile string) string {
	t.Helper()
	var folder string
	testenv.Eventually(t, "a SPIFFE credential folder for pod "+pod, 60*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(dir, ns, pod, "*", nodeagent.SPIFFECredentialBundleFile))
		if len(found) != 1 {
			return false
		}
		folder = filepath.Dir(found[0])
		b, err := x509bundle.Load(spiffeid.RequireTrustDomainFromString(strings.TrimSuffix(trustFile, nodeagent.TrustBundleSuffix)), filepath.Join(folder, trustFile))
		if err != nil {
			return false
		}
		svid, err := x509svid.Load(found[0], found[0])
		if err != nil {
			return false
		}
		_, _, err = x509svid.Verify(svid.Certificates, b)
		return err == nil
	})
	return folder
}

// checkSPIFFEFiles: the folder holds the draft's files and not kubelet's; the credential
// bundle is a PRIVATE KEY block then CERTIFICATE blocks without the self-signed trust
// anchor; the trust bundle holds CERTIFICATE blocks only; no headers, nothing between.
func checkSPIFFEFiles(t *testing.T, folder, trustFile string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(folder, nodeagent.BundleFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %s written with --layout=spiffe (%v)", folder, nodeagent.BundleFile, err)
	}
	types, certs := strictPEM(t, filepath.Join(folder, nodeagent.SPIFFECredentialBundleFile))
	if len(types) < 2 || types[0] != "PRIVATE KEY" || slices.ContainsFunc(types[1:], func(s string) bool { return s != "CERTIFICATE" }) {
		t.Errorf("%s blocks %v, want PRIVATE KEY then CERTIFICATE blocks", nodeagent.SPIFFECredentialBundleFile, types)
	}
	for i, c := range certs {
		if bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil {
			t.Errorf("%s: certificate %d (%s) is self-signed: the trust anchor, which the draft keeps out of it", nodeagent.SPIFFECredentialBundleFile, i, c.Subject)
		}
	}
	types, certs = strictPEM(t, filepath.Join(folder, trustFile))
	if len(certs) == 0 || len(types) != len(certs) {
		t.Errorf("%s blocks %v, want CERTIFICATE blocks only", trustFile, types)
	}
}

// strictPEM reads path's PEM blocks: their types, and the certificates among them. Data
// outside the blocks or headers fail the test; a key is never printed.
func strictPEM(t *testing.T, path string) ([]string, []*x509.Certificate) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var certs []*x509.Certificate
	for rest := raw; len(rest) > 0; {
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			t.Errorf("%s: %d bytes outside PEM blocks", path, len(rest))
			break
		}
		block, after := pem.Decode(rest)
		if block == nil {
			t.Errorf("%s: a PEM block that does not decode", path)
			break
		}
		if len(block.Headers) > 0 {
			t.Errorf("%s: a %s block with headers", path, block.Type)
		}
		types = append(types, block.Type)
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			certs = append(certs, c)
		}
		rest = after
	}
	return types, certs
}

// exchangeOverMTLS runs one connection over a loopback listener, the server with
// serverConfig, the client with clientConfig: the client sends a byte and the server
// answers one. It returns each side's first error.
func exchangeOverMTLS(t *testing.T, serverConfig, clientConfig *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		conn := tls.Server(raw, serverConfig)
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.Handshake(); err != nil {
			served <- err
			return
		}
		b := make([]byte, 1)
		if _, err := conn.Read(b); err != nil {
			served <- err
			return
		}
		_, err = conn.Write([]byte{b[0] + 1})
		served <- err
	}()
	clientErr = func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), clientConfig)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte{'c'}); err != nil {
			return err
		}
		b := make([]byte, 1)
		if _, err := conn.Read(b); err != nil {
			return err
		}
		if b[0] != 'd' {
			return errors.New("the server answered another byte")
		}
		return nil
	}()
	return <-served, clientErr
}

// testCA is a self-signed CA that issues SPIFFE leaves.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// issue is a leaf with the SPIFFE ID id, as the signer makes them.
func (ca *testCA) issue(t *testing.T, id string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	uri, err := url.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{uri}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
