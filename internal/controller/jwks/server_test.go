package jwks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// answer is what a test reads of a response: the body is read and closed by get.
type answer struct {
	StatusCode int
	Header     http.Header
}

func get(t *testing.T, url string, header ...string) (answer, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, body
}

func TestNativeServer(t *testing.T) {
	mgr := startManager(t)
	ns := newNamespace(t)
	first := newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "native", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.Issuer = "https://issuer.example"
		c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(90 * time.Second)
	})
	waitReady(t, ns, "native", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	base := "http://" + mgr.serverAddr + "/" + ns + "/native"

	// The server reads the set from the controller's cache, which may trail the status.
	var resp answer
	var body []byte
	testenv.Eventually(t, "the server to serve the published set", 30*time.Second, func() bool {
		resp, body = get(t, base+"/jwks.json")
		return resp.StatusCode == 200 && string(body) == getConfigMap(t, ns, "native-jwks").Data[jwks.DocumentKey]
	})
	for header, want := range map[string]string{
		"Content-Type":                "application/json",
		"Access-Control-Allow-Origin": "*",
		"Cache-Control":               "public, max-age=90",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if resp, body := get(t, base+"/jwks.json", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("If-None-Match with the current ETag: %d", resp.StatusCode)
	}

	// A rotation is served without restarting anything, through the watch.
	second := newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(second))
	kid2, _ := expectedDoc(t, second)
	testenv.Eventually(t, "the new key to be served", 30*time.Second, func() bool {
		_, body := get(t, base+"/jwks.json")
		return strings.Contains(string(body), kid2)
	})
	if resp, _ := get(t, base+"/jwks.json", "If-None-Match", etag); resp.StatusCode != 200 || resp.Header.Get("ETag") == etag {
		t.Errorf("the old ETag still matches after a change: %d", resp.StatusCode)
	}

	resp, body = get(t, base+"/.well-known/openid-configuration")
	var discovery map[string]any
	if err := json.Unmarshal(body, &discovery); err != nil || resp.StatusCode != 200 {
		t.Fatalf("discovery: %d %s", resp.StatusCode, body)
	}
	if discovery["issuer"] != "https://issuer.example" || discovery["jwks_uri"] != "https://issuer.example/"+ns+"/native/jwks.json" {
		t.Errorf("discovery = %v", discovery)
	}

	for _, path := range []string{"/" + ns + "/nosuch/jwks.json", "/nosuch/native/jwks.json"} {
		if resp, _ := get(t, "http://"+mgr.serverAddr+path); resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func TestETagMatching(t *testing.T) {
	for header, want := range map[string]bool{`"a"`: true, `"b", "a"`: true, `W/"a"`: true, `*`: true, `"b"`: false, ``: false} {
		if got := etagMatches(header, `"a"`); got != want {
			t.Errorf("If-None-Match %q: %v, want %v", header, got, want)
		}
	}
}
