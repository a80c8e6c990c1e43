package jwkset

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestNginxServesTheSetOnEveryPath runs the generated server block in Debian's nginx on
// loopback, with a generated jwks.json, and checks what a client receives.
func TestNginxServesTheSetOnEveryPath(t *testing.T) {
	doc, _, base := startGeneratedNginx(t, false)
	for _, path := range []string{"/jwks.json", "/", "/.well-known/jwks.json", "/any/other/path?x=1", "/.well-known/openid-configuration"} {
		expectFile(t, base+path, doc)
	}
	expectPreflight(t, base+"/jwks.json")
}

// TestNginxServesDiscovery runs the server block trustplane generates for a JWKSConfig
// with an issuer: every path ending in /.well-known/openid-configuration answers with the
// discovery document, whatever the issuer's path, and every other path with the set.
func TestNginxServesDiscovery(t *testing.T) {
	doc, discovery, base := startGeneratedNginx(t, true)
	for _, path := range []string{"/.well-known/openid-configuration", "/tenants/a/.well-known/openid-configuration", "/ns/name/.well-known/openid-configuration?x=1"} {
		expectFile(t, base+path, discovery)
	}
	for _, path := range []string{"/jwks.json", "/tenants/a/jwks.json", "/", "/.well-known/openid-configuration/x", "/openid-configuration"} {
		expectFile(t, base+path, doc)
	}
	expectPreflight(t, base+"/.well-known/openid-configuration")
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// startGeneratedNginx serves a generated set (and its discovery document) with the server
// block NginxServer renders, and returns both documents and the server's base URL.
func startGeneratedNginx(t *testing.T, discovery bool) (doc, discoveryDoc []byte, base string) {
	t.Helper()
	html := t.TempDir()
	doc, err := Marshal([]PublishedKey{{Key: mustParse(t, newChain(t, testcerts.P256))}})
	if err != nil {
		t.Fatal(err)
	}
	discoveryDoc, err = Discovery("https://idp.example/tenants/a", doc)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{DocumentKey: doc, DiscoveryKey: discoveryDoc} {
		if err := os.WriteFile(filepath.Join(html, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := testenv.FreeAddr(t)
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	server := NginxServer(port, html, 7*time.Minute, discovery)
	// The server block goes into the http block exactly as it goes into conf.d in the pod;
	// only the listen address is narrowed to loopback.
	testenv.StartNginx(t, strings.ReplaceAll(server, fmt.Sprintf("listen %d;", port), "listen "+addr+";"))
	return doc, discoveryDoc, "http://" + addr
}

// expectFile checks that url answers 200 with want and the headers of a published JSON
// document.
func expectFile(t *testing.T, url string, want []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Errorf("%s: %d %s, want %s", url, resp.StatusCode, body, want)
	}
	for header, want := range map[string]string{
		"Content-Type":                 "application/json",
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
		"Cache-Control":                "public, max-age=420",
		"X-Content-Type-Options":       "nosniff",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s: %s = %q, want %q", url, header, got, want)
		}
	}
}

func expectPreflight(t *testing.T, url string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodOptions, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("CORS preflight of %s: %d, allow-origin %q", url, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
