package nodeagent

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
)

// testCert is a certificate and its key.
type testCert struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newTestCert makes a certificate signed by parent (self-signed when nil): a CA when ca,
// otherwise a leaf with the URI SANs uris.
func newTestCert(t *testing.T, cn string, parent *testCert, ca bool, uris ...string) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, IsCA: ca}
	if ca {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
	}
	for _, u := range uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: cert, key: key}
}

func certsPEM(certs ...*testCert) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})...)
	}
	return out
}

// pemBlocks are the types of raw's PEM blocks and the DER of its certificates, failing
// on headers or on anything between or after the blocks (the draft allows neither).
func pemBlocks(t *testing.T, raw []byte) (types []string, certs [][]byte) {
	t.Helper()
	for rest := raw; len(rest) > 0; {
		block, after := pem.Decode(rest)
		if block == nil || !strings.HasPrefix(string(rest), "-----BEGIN ") {
			t.Fatalf("data outside PEM blocks: %q", rest)
		}
		if len(block.Headers) != 0 {
			t.Errorf("a %s block with headers", block.Type)
		}
		types = append(types, block.Type)
		if block.Type == "CERTIFICATE" {
			certs = append(certs, block.Bytes)
		}
		rest = after
	}
	return types, certs
}

func TestSPIFFECredentialBundleStopsBeforeTheTrustAnchor(t *testing.T) {
	root := newTestCert(t, "root", nil, true)
	intermediate := newTestCert(t, "intermediate", root, true)
	leaf := newTestCert(t, "leaf", intermediate, false, "spiffe://cluster.local/ns/apps/sa/web")
	key, err := x509.MarshalPKCS8PrivateKey(leaf.key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	for _, tc := range []struct {
		name  string
		chain []*testCert
		want  []*testCert
	}{
		{"leaf and root", []*testCert{leaf, root}, []*testCert{leaf}},
		{"leaf, intermediate and root", []*testCert{leaf, intermediate, root}, []*testCert{leaf, intermediate}},
		{"leaf and intermediate, no root", []*testCert{leaf, intermediate}, []*testCert{leaf, intermediate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle, gotLeaf, err := spiffeCredentialBundle(keyPEM, certsPEM(tc.chain...))
			if err != nil {
				t.Fatal(err)
			}
			if !gotLeaf.Equal(leaf.cert) {
				t.Errorf("the leaf returned is %s", gotLeaf.Subject)
			}
			types, certs := pemBlocks(t, bundle)
			wantTypes := []string{"PRIVATE KEY"}
			for range tc.want {
				wantTypes = append(wantTypes, "CERTIFICATE")
			}
			if !slices.Equal(types, wantTypes) {
				t.Fatalf("blocks %v, want %v", types, wantTypes)
			}
			for i, c := range tc.want {
				if string(certs[i]) != string(c.cert.Raw) {
					t.Errorf("certificate %d is not %s", i, c.cert.Subject.CommonName)
				}
			}
		})
	}
	if _, _, err := spiffeCredentialBundle(keyPEM, []byte("not a chain")); err == nil {
		t.Error("a chain that is not PEM accepted")
	}
	if _, _, err := spiffeCredentialBundle(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}), certsPEM(leaf, root)); err == nil {
		t.Error("a key that is not PKCS#8 accepted")
	}
}

// bundleObject is a ClusterTrustBundle of signerName with labels and the certificates.
func bundleObject(name, signerName string, labels map[string]string, certs ...*testCert) certificatesv1.ClusterTrustBundle {
	return certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: string(certsPEM(certs...))}}
}

func spiffeLabels(canarying, workload, peer string) map[string]string {
	return map[string]string{certificates.LabelCanarying: canarying, certificates.LabelWorkloadTrustDomain: workload, certificates.LabelPeerTrustDomain: peer}
}

func TestTrustBundlesAreSelectedBySignerAndLabels(t *testing.T) {
	const signerName = "example.com/s"
	own, next, federated := newTestCert(t, "own", nil, true), newTestCert(t, "next", nil, true), newTestCert(t, "federated", nil, true)
	live := certificates.LabelCanaryingLive
	all := []certificatesv1.ClusterTrustBundle{
		bundleObject("z-own", signerName, spiffeLabels(live, "cluster.local", "cluster.local"), own, next),
		bundleObject("a-own-again", signerName, spiffeLabels(live, "cluster.local", "cluster.local"), next),
		bundleObject("federated", signerName, spiffeLabels(live, "cluster.local", "other.example"), federated),
		bundleObject("other-signer", "example.com/other", spiffeLabels(live, "cluster.local", "cluster.local"), federated),
		bundleObject("preview", signerName, spiffeLabels(certificates.LabelCanaryingPreview, "cluster.local", "cluster.local"), federated),
		bundleObject("other-workloads", signerName, spiffeLabels(live, "other.example", "cluster.local"), federated),
		bundleObject("unlabelled", signerName, nil, federated),
		bundleObject("bad-peer", signerName, spiffeLabels(live, "cluster.local", "Not_A.Domain"), federated),
	}
	selected := selectTrustBundles(all, signerName, spiffeid.RequireTrustDomainFromString("cluster.local"), nil)
	var names []string
	for _, b := range selected {
		names = append(names, b.Name)
	}
	if want := []string{"a-own-again", "bad-peer", "federated", "z-own"}; !slices.Equal(names, want) {
		t.Fatalf("selected %v, want %v", names, want)
	}
	if got := selectTrustBundles(all, "", spiffeid.RequireTrustDomainFromString("cluster.local"), nil); len(got) != 0 {
		t.Errorf("a projection without a signer selected %d bundles", len(got))
	}

	files, skipped := trustBundleFiles(selected)
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, []string{"cluster.local.trust-bundle.pem", "other.example.trust-bundle.pem"}) {
		t.Fatalf("files %v, want one per peer trust domain", got)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "bad-peer") {
		t.Errorf("skipped %q, want the bundle whose peer trust domain is not one", skipped)
	}
	// The bundles of one peer trust domain concatenated, each certificate once, in the
	// order of the bundles' names.
	for name, want := range map[string][]*testCert{"cluster.local.trust-bundle.pem": {next, own}, "other.example.trust-bundle.pem": {federated}} {
		types, certs := pemBlocks(t, files[name])
		if len(certs) != len(want) || len(types) != len(certs) {
			t.Errorf("%s: blocks %v, want %d certificates only", name, types, len(want))
			continue
		}
		for i, c := range want {
			if string(certs[i]) != string(c.cert.Raw) {
				t.Errorf("%s: certificate %d is not %s", name, i, c.cert.Subject.CommonName)
			}
		}
	}
}

// spiffeAgent is an issuing agent writing the SPIFFE layout, listing ClusterTrustBundles
// from a fake client holding bundles.
func spiffeAgent(t *testing.T, bundles ...certificatesv1.ClusterTrustBundle) (*issuingAgent, client.Client) {
	t.Helper()
	ia := newIssuingAgent(t)
	ia.opts.Layout = LayoutSPIFFE
	objs := make([]client.Object, len(bundles))
	for i := range bundles {
		objs[i] = &bundles[i]
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	ia.reader = c
	return ia, c
}

// folder is the projection directory's file names, sorted.
func (ia *issuingAgent) folder(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(ia.dir, "apps/web/id-0"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestSPIFFELayoutFolder: with --layout=spiffe a projection's directory is a credential
// folder: credential-bundle.pem (the key and the leaf, not the root) instead of
// credentialbundle.pem, the projection's own paths, and a trust bundle file per peer trust
// domain; a trust domain whose bundle goes is removed, and so is a stale trust bundle
// file planted as a link, without its target being touched.
func TestSPIFFELayoutFolder(t *testing.T) {
	root, federated := newTestCert(t, "root", nil, true), newTestCert(t, "federated", nil, true)
	live := certificates.LabelCanaryingLive
	ia, c := spiffeAgent(t,
		bundleObject("own", "example.com/s", spiffeLabels(live, "cluster.local", "cluster.local"), root),
		bundleObject("federated", "example.com/s", spiffeLabels(live, "cluster.local", "other.example"), federated))
	leaf := newTestCert(t, "web", root, false, "spiffe://cluster.local/ns/apps/sa/web")
	ia.issueChain(t, "ED25519", certsPEM(leaf, root))
	ctx := context.Background()
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	want := []string{"bundle.pem", "cluster.local.trust-bundle.pem", "credential-bundle.pem", "other.example.trust-bundle.pem", "tls"}
	if got := ia.folder(t); !slices.Equal(got, want) {
		t.Fatalf("folder %v, want %v", got, want)
	}
	credential, _ := os.ReadFile(filepath.Join(ia.dir, "apps/web/id-0", SPIFFECredentialBundleFile))
	if types, certs := pemBlocks(t, credential); !slices.Equal(types, []string{"PRIVATE KEY", "CERTIFICATE"}) || string(certs[0]) != string(leaf.cert.Raw) {
		t.Errorf("credential-bundle.pem blocks %v, want the key and the leaf", types) // never the key itself
	}
	trust, _ := os.ReadFile(filepath.Join(ia.dir, "apps/web/id-0", "cluster.local.trust-bundle.pem"))
	if _, certs := pemBlocks(t, trust); len(certs) != 1 || string(certs[0]) != string(root.cert.Raw) {
		t.Errorf("cluster.local.trust-bundle.pem holds %d certificates, want the root", len(certs))
	}
	// The projection's own credentialBundlePath keeps kubelet's content: the whole chain.
	own, _ := os.ReadFile(filepath.Join(ia.dir, "apps/web/id-0", "bundle.pem"))
	if _, certs := pemBlocks(t, own); len(certs) != 2 {
		t.Errorf("the projection's credentialBundlePath holds %d certificates, want the chain's 2", len(certs))
	}

	// De-federation: the federated bundle deleted, its file goes; a stale trust bundle
	// planted as a link goes too, as a link.
	fed := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "federated"}}
	if err := c.Delete(ctx, fed); err != nil {
		t.Fatal(err)
	}
	out := newOutside(t)
	if err := os.Symlink(filepath.Join(out.dir, "passwd"), filepath.Join(ia.dir, "apps/web/id-0", "gone.example.trust-bundle.pem")); err != nil {
		t.Fatal(err)
	}
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	if got, want := ia.folder(t), []string{"bundle.pem", "cluster.local.trust-bundle.pem", "credential-bundle.pem", "tls"}; !slices.Equal(got, want) {
		t.Errorf("after de-federation folder %v, want %v", got, want)
	}
	out.untouched(t)
	if raw, _ := os.ReadFile(filepath.Join(out.dir, "passwd")); string(raw) != "root:x:0:0\n" {
		t.Error("the target of a removed link changed")
	}
	if got := drainEvents(ia.recorder); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// TestNoSPIFFEIDIsReportedOnce: a leaf without a SPIFFE ID under --layout=spiffe gets its
// credential written, no trust bundle file (those written before go), and one Warning
// event however often it is written.
func TestNoSPIFFEIDIsReportedOnce(t *testing.T) {
	root := newTestCert(t, "root", nil, true)
	ia, _ := spiffeAgent(t, bundleObject("own", "example.com/s", spiffeLabels(certificates.LabelCanaryingLive, "cluster.local", "cluster.local"), root))
	ctx := context.Background()
	ia.issueChain(t, "ED25519", certsPEM(newTestCert(t, "web", root, false, "spiffe://cluster.local/ns/apps/sa/web"), root))
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ia.folder(t), "cluster.local.trust-bundle.pem") {
		t.Fatal("no trust bundle file for a leaf with a SPIFFE ID")
	}
	for i, uris := range [][]string{nil, {"https://example.com/web"}, {"spiffe://cluster.local/a", "spiffe://cluster.local/b"}} {
		// Another key type each time: a new request, so a new certificate.
		ia.issueChain(t, []string{"ECDSAP256", "ED25519", "ECDSAP384"}[i], certsPEM(newTestCert(t, "web", root, false, uris...), root))
		for range 3 {
			if err := ia.handleProjections(ctx, ia.pod, map[podcert.Key]*corev1.PodCertificateProjection{ia.key(): ia.src()}); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := ia.folder(t), []string{"bundle.pem", "credential-bundle.pem", "tls"}; !slices.Equal(got, want) {
			t.Errorf("URIs %q: folder %v, want %v", uris, got, want)
		}
		got := drainEvents(ia.recorder)
		if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+certificates.ReasonNoSPIFFEID+" ") || !strings.Contains(got[0], "volume id") {
			t.Errorf("URIs %q: events %q, want one %s naming the volume", uris, got, certificates.ReasonNoSPIFFEID)
		}
	}
}

func TestLayoutFlag(t *testing.T) {
	for arg, want := range map[string]string{"": LayoutKubernetes, "--layout=spiffe": LayoutSPIFFE, "--layout=kubernetes": LayoutKubernetes} {
		opts := DefaultOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		opts.AddFlags(fs)
		args := []string{"--node-name=n"}
		if arg != "" {
			args = append(args, arg)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if opts.Layout != want || opts.Validate() != nil {
			t.Errorf("%q: layout %q (%v), want %q", arg, opts.Layout, opts.Validate(), want)
		}
	}
	opts := DefaultOptions()
	opts.NodeName, opts.Layout = "n", "spire"
	if err := opts.Validate(); err == nil || err.Error() != `--layout "spire": one of kubernetes, spiffe` {
		t.Errorf("--layout=spire: %v", err)
	}
}

// TestBundleChangeRequeuesThePodsOfItsSigner: a ClusterTrustBundle maps to the node's pods
// served for its signer, and no others.
func TestBundleChangeRequeuesThePodsOfItsSigner(t *testing.T) {
	pod := func(name, signerName string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Annotations: map[string]string{SignerAnnotation: signerName}},
			Spec: corev1.PodSpec{NodeName: "n", ServiceAccountName: "web"}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pod("a", "example.com/s"), pod("b", "example.com/other"), pod("c", "example.com/s"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "plain"}}).Build()
	a := &Agent{opts: DefaultOptions(), reader: c}
	ctb := bundleObject("own", "example.com/s", nil)
	var got []string
	for _, r := range a.podsOfSigner(context.Background(), &ctb) {
		got = append(got, r.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("requeued %v, want the pods of the signer a and c", got)
	}
}

// TestChangingTheLayoutRemovesTheOtherLayoutsFiles: after --layout changes, the other
// layout's bundle (no longer refreshed) does not stay beside the current one; the
// projection's own paths stay.
func TestChangingTheLayoutRemovesTheOtherLayoutsFiles(t *testing.T) {
	root := newTestCert(t, "root", nil, true)
	ia, _ := spiffeAgent(t, bundleObject("own", "example.com/s", spiffeLabels(certificates.LabelCanaryingLive, "cluster.local", "cluster.local"), root))
	ia.issueChain(t, "ED25519", certsPEM(newTestCert(t, "web", root, false, "spiffe://cluster.local/ns/apps/sa/web"), root))
	ctx := context.Background()
	ia.opts.Layout = LayoutKubernetes
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	if got, want := ia.folder(t), []string{"bundle.pem", BundleFile, "tls"}; !slices.Equal(got, want) {
		t.Fatalf("kubernetes layout: folder %v, want %v", got, want)
	}
	ia.opts.Layout = LayoutSPIFFE
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	if got, want := ia.folder(t), []string{"bundle.pem", "cluster.local.trust-bundle.pem", SPIFFECredentialBundleFile, "tls"}; !slices.Equal(got, want) {
		t.Errorf("switched to spiffe: folder %v, want %v", got, want)
	}
	ia.opts.Layout = LayoutKubernetes
	if err := ia.writeBundle(ctx, ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	if got, want := ia.folder(t), []string{"bundle.pem", BundleFile, "tls"}; !slices.Equal(got, want) {
		t.Errorf("switched back to kubernetes: folder %v, want %v", got, want)
	}
}

// TestCanariesSelectThePreviewBundle: a workload that is a canary of a peer trust domain's
// preview bundle loads the preview bundles of that domain instead of its live ones (a
// preview bundle is complete on its own); everyone else, and every domain without a
// preview, loads the live ones.
func TestCanariesSelectThePreviewBundle(t *testing.T) {
	const signerName = "example.com/pods"
	own, next, federated := newTestCert(t, "own", nil, true), newTestCert(t, "next", nil, true), newTestCert(t, "federated", nil, true)
	live, preview := certificates.LabelCanaryingLive, certificates.LabelCanaryingPreview
	all := []certificatesv1.ClusterTrustBundle{
		bundleObject("live", signerName, spiffeLabels(live, "cluster.local", "cluster.local"), own),
		bundleObject("preview", signerName, spiffeLabels(preview, "cluster.local", "cluster.local"), own, next),
		bundleObject("federated", signerName, spiffeLabels(live, "cluster.local", "other.example"), federated),
	}
	td := spiffeid.RequireTrustDomainFromString("cluster.local")
	names := func(canary func(certificatesv1.ClusterTrustBundle) bool) []string {
		var out []string
		for _, b := range selectTrustBundles(all, signerName, td, canary) {
			out = append(out, b.Name)
		}
		return out
	}
	if got := names(func(certificatesv1.ClusterTrustBundle) bool { return true }); !slices.Equal(got, []string{"federated", "preview"}) {
		t.Errorf("a canary selected %v, want the preview bundle and the federated live one", got)
	}
	if got := names(func(certificatesv1.ClusterTrustBundle) bool { return false }); !slices.Equal(got, []string{"federated", "live"}) {
		t.Errorf("a pod that is no canary selected %v, want the live bundles", got)
	}
}
