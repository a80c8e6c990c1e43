package jwks

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
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
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(nginx); err != nil {
		t.Fatal("nginx is not installed: `make test` installs it (hack/install-test-deps.sh)")
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "html")
	if err := os.MkdirAll(html, 0o755); err != nil {
		t.Fatal(err)
	}
	doc, err := Marshal([]PublishedKey{{Key: mustParse(t, newChain(t, testcerts.P256))}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(html, DocumentKey), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	_, portText, _ := net.SplitHostPort(testenv.FreeAddr(t))
	port, _ := strconv.Atoi(portText)
	server := NginxServer(port, html, 7*time.Minute)
	// The server block goes into the http block exactly as it goes into conf.d in the pod;
	// only the process settings around it are the test's own.
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include /etc/nginx/mime.types;
%[2]s
}
`, dir, strings.ReplaceAll(server, fmt.Sprintf("listen %d;", port), fmt.Sprintf("listen 127.0.0.1:%d;", port)))
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-c", confPath, "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t rejects the generated config: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-c", confPath, "-p", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitForHTTP(t, base+"/healthz", &stderr)
	for _, path := range []string{"/jwks.json", "/", "/.well-known/jwks.json", "/any/other/path?x=1"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(body, doc) {
			t.Errorf("%s: %d, body equal to jwks.json: %v", path, resp.StatusCode, bytes.Equal(body, doc))
		}
		for header, want := range map[string]string{
			"Content-Type":                 "application/json",
			"Access-Control-Allow-Origin":  "*",
			"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
			"Cache-Control":                "public, max-age=420",
		} {
			if got := resp.Header.Get(header); got != want {
				t.Errorf("%s: %s = %q, want %q", path, header, got, want)
			}
		}
	}
	req, _ := http.NewRequest(http.MethodOptions, base+"/jwks.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("CORS preflight: %d, allow-origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func waitForHTTP(t *testing.T, url string, logs *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
