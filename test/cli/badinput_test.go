package cli_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bareCluster is an API server that serves no API group: a cluster without trustplane's
// CRDs (nor much else). It returns a kubeconfig file for it.
func bareCluster(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`)
		case "/apis":
			fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return kubeconfigFor(t, srv.URL)
}

func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
`, server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadInput: an unknown kind or name, a cluster without trustplane's CRDs, one that
// cannot be reached, a token that is not a JWT, a PEM without a certificate: one line
// naming the problem, exit 1, never a stack trace.
func TestBadInput(t *testing.T) {
	bare := bareCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := kubeconfigFor(t, "https://"+l.Addr().String())
	_ = l.Close()
	dir := t.TempDir()
	keyOnly, empty := filepath.Join(dir, "key.pem"), filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(keyOnly, newChain(t).KeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const noCRDs = "trustplane's CRDs are not installed"
	for _, tc := range []struct {
		args []string
		want string
	}{
		// A cluster without the CRDs.
		{[]string{"get", "--kubeconfig", bare}, "the cluster serves none of trustplane's kinds: its CRDs are not installed"},
		{[]string{"get", "-A", "--kubeconfig", bare}, "the cluster serves none of trustplane's kinds"},
		{[]string{"get", "jwksconfig", "--kubeconfig", bare}, "the cluster does not serve JWKSConfig (jwks.trustplane.io/v1alpha1): " + noCRDs},
		{[]string{"describe", "cluster", "prod", "--kubeconfig", bare}, "the cluster does not serve Cluster (operator.kyma-project.io/v1alpha1): " + noCRDs},
		{[]string{"kubeconfig", "reader", "--kubeconfig", bare}, "the cluster does not serve KubeconfigRequest"},
		{[]string{"rotate", "kcr", "reader", "--kubeconfig", bare}, "the cluster does not serve KubeconfigRequest"},
		{[]string{"reconcile", "jwksconfig", "issuer", "--kubeconfig", bare}, "the cluster does not serve JWKSConfig"},
		{[]string{"checksum", "diff", "--kubeconfig", bare}, "the cluster does not serve SecretCheckSums (tengine.taobao.org/v1): their CRDs are not installed"},
		{[]string{"jwks", "verify", "a.b.c", "--jwksconfig", "issuer", "--kubeconfig", bare}, "the cluster does not serve JWKSConfig"},
		// A cluster that does not answer.
		{[]string{"get", "--kubeconfig", nowhere}, "connection refused"},
		{[]string{"describe", "jwks", "issuer", "--kubeconfig", nowhere}, "connection refused"},
		// Unknown kinds and names.
		{[]string{"get", "secrets", "--kubeconfig", admin(t)}, `unknown kind "secrets" (one of jwksconfig, clusterrole,`},
		{[]string{"describe", "deployment", "x", "--kubeconfig", admin(t)}, `unknown kind "deployment"`},
		{[]string{"reconcile", "nosuch", "x", "--kubeconfig", admin(t)}, `unknown kind "nosuch"`},
		{[]string{"get", "jwksconfig", "nosuch", "-n", "default", "--kubeconfig", admin(t)}, `jwksconfig "nosuch" not found in namespace "default"`},
		{[]string{"describe", "signerca", "nosuch", "--kubeconfig", admin(t)}, `signerca "nosuch" not found`},
		{[]string{"describe", "pod", "nosuch", "-n", "default", "--kubeconfig", admin(t)}, `pod "nosuch" not found in namespace "default"`},
		{[]string{"reconcile", "cluster", "nosuch", "-n", "default", "--kubeconfig", admin(t)}, `cluster "nosuch" not found in namespace "default"`},
		{[]string{"revoke", "kcr", "nosuch", "-n", "default", "--kubeconfig", admin(t)}, `kubeconfigrequest "nosuch" not found in namespace "default"`},
		{[]string{"get", "jwks,cluster", "x", "--kubeconfig", admin(t)}, "a NAME needs exactly one KIND"},
		{[]string{"get", "-o", "xml", "--kubeconfig", admin(t)}, `unknown output format "xml": use table, wide, json or yaml`},
		{[]string{"get", "a", "b", "c"}, "accepts at most 2 arg(s), received 3"},
		{[]string{"manager", "--podcertificate-signer-trust-domain", "spiffe://cluster.local", "--kubeconfig", nowhere},
			`--podcertificate-signer-trust-domain "spiffe://cluster.local" is not a SPIFFE trust domain: write the name alone, such as cluster.local`},
		{[]string{"manager", "--podcertificate-signer-trust-domain", "Cluster.Local", "--kubeconfig", nowhere},
			`--podcertificate-signer-trust-domain "Cluster.Local" is not a SPIFFE trust domain: trust domain characters are limited to lowercase letters, numbers, dots, dashes, and underscores; such as cluster.local`},
		{[]string{"manager", "--podcertificate-signer-cluster-domain", "Cluster.Local", "--kubeconfig", nowhere},
			`--podcertificate-signer-cluster-domain "Cluster.Local": a lowercase RFC 1123 subdomain`},
		{[]string{"manager", "--podcertificate-signer-canary-namespace-selector", "team in (a,b", "--kubeconfig", nowhere},
			`--podcertificate-signer-canary-namespace-selector "team in (a,b":`},
		{[]string{"manager", "--podcertificate-signer-ca-rotation", "3h", "--podcertificate-signer-ca-overlap", "1h", "--podcertificate-signer-canary-observation", "2h", "--kubeconfig", nowhere},
			`--podcertificate-signer-ca-rotation (3h0m0s) must be longer than --podcertificate-signer-ca-overlap (1h0m0s) plus --podcertificate-signer-canary-observation (2h0m0s)`},
		{[]string{"node-agent", "--node-name", "n", "--layout", "spire", "--kubeconfig", nowhere}, `--layout "spire": one of kubernetes, spiffe`},
		// Tokens and PEM files.
		{[]string{"jwks", "verify", "not-a-jwt", "--issuer", "https://127.0.0.1:1"}, "connection refused"},
		{[]string{"jwks", "verify", "not-a-jwt", "--jwksconfig", "nosuch", "-n", "default", "--kubeconfig", admin(t)}, `jwksconfig "nosuch" not found`},
		{[]string{"jwks", "inspect", keyOnly}, keyOnly + " holds no certificate (its PEM blocks: PRIVATE KEY)"},
		{[]string{"jwks", "inspect", empty}, empty + " holds no PEM certificate"},
		{[]string{"jwks", "inspect", filepath.Join(dir, "missing.pem")}, "no such file or directory"},
		{[]string{"podcert", "inspect"}, "accepts 1 arg(s), received 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			tpRaw(t, tc.args...).fails(t, tc.want)
		})
	}
}
