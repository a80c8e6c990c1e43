package testenv

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// ProxyTLS is what a test's TLS reverse proxy (nginx, StartNginx) serves with: a
// certificate for localhost and 127.0.0.1 from a CA of its own, and a client that trusts
// that CA, as a relying party configured with it does.
type ProxyTLS struct {
	// Conf holds the http-level ssl_certificate directives, to go before the proxy's
	// server blocks in StartNginx's httpConf.
	Conf string
	// Client trusts the proxy's CA, and no other.
	Client *http.Client
	// CAPEM is the proxy's CA certificate, PEM-encoded.
	CAPEM []byte
}

// NewProxyTLS makes a CA and a P-256 serving certificate it issues for localhost and
// 127.0.0.1, written to the test's temporary directory.
func NewProxyTLS(tb testing.TB) ProxyTLS {
	tb.Helper()
	caKey, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := testcerts.NewChain(caKey, "proxy", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.CA, key.Public(), ca.CAKey)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	certFile, keyFile := filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	if err := os.WriteFile(certFile, testcerts.CertPEM(leaf), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, testcerts.KeyPEM(key), 0o600); err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.CA)
	return ProxyTLS{
		Conf: fmt.Sprintf("    ssl_certificate %s;\n    ssl_certificate_key %s;\n", certFile, keyFile),
		Client: &http.Client{
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
			Timeout:   10 * time.Second,
		},
		CAPEM: testcerts.CertPEM(ca.CA),
	}
}

// ProxyServer is an nginx TLS server block listening on addr with the given locations
// (the certificate comes from ProxyTLS.Conf, at the http level).
func ProxyServer(addr, locations string) string {
	return fmt.Sprintf("server {\n    listen %s ssl;\n%s\n}\n", addr, locations)
}

// PathPreservingProxy is an nginx TLS server block on addr that passes every path
// unchanged to the plain-HTTP backend (host:port) and the host asked for in
// X-Forwarded-Host, as docs/jwks.md ("Discovery behind a proxy") lays out a
// path-preserving proxy in front of trustplane's JWKS server; the server must trust
// 127.0.0.1 as a proxy (--jwks-server-trusted-proxies=127.0.0.1/32).
func PathPreservingProxy(addr, backend string) string {
	return ProxyServer(addr, fmt.Sprintf(`
    location / {
        proxy_pass http://%s;
        proxy_set_header X-Forwarded-Host $http_host;
    }`, backend))
}
