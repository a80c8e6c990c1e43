package jwks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
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
	// The test plays the proxy in front, on loopback: its X-Forwarded-Host counts.
	mgr := startManager(t, func(o *Options) { o.TrustedProxies = []string{"127.0.0.1/32"} })
	ns := newNamespace(t)
	first := newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(first))
	// Other tests of the package have issuers at a root too: the host tells them apart.
	host := ns + ".issuer.example"
	issuer := "https://" + host
	newJWKSConfig(t, ns, "native", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.Issuer = issuer
		c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(90 * time.Second)
	})
	waitReady(t, ns, "native", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	base := "http://" + mgr.serverAddr + "/" + ns + "/native"

	// The server reads the set from the controller's cache, which may trail the status.
	var resp answer
	var body []byte
	testenv.Eventually(t, "the server to serve the published set", 30*time.Second, func() bool {
		resp, body = get(t, base+"/jwks.json")
		return resp.StatusCode == 200 && string(body) == getConfigMap(t, ns, "native-jwks").Data[jwkset.DocumentKey]
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

	// The issuer is at a host's root: through a root-mapping proxy the discovery document
	// is asked for on the canonical route, through a path-preserving one at the root,
	// found through the issuer path index Setup registers. jwks_uri is the issuer's.
	for _, path := range []string{"/" + ns + "/native/.well-known/openid-configuration", "/.well-known/openid-configuration"} {
		resp, body = get(t, "http://"+mgr.serverAddr+path, "X-Forwarded-Host", host)
		var discovery map[string]any
		if err := json.Unmarshal(body, &discovery); err != nil || resp.StatusCode != 200 {
			t.Fatalf("discovery at %s: %d %s", path, resp.StatusCode, body)
		}
		if discovery["issuer"] != issuer || discovery["jwks_uri"] != issuer+"/jwks.json" {
			t.Errorf("discovery at %s = %v", path, discovery)
		}
	}
	if _, body := get(t, "http://"+mgr.serverAddr+"/jwks.json", "X-Forwarded-Host", host); !strings.Contains(string(body), kid2) {
		t.Errorf("/jwks.json, the issuer's jwks_uri through a path-preserving proxy: %s", body)
	}

	for _, path := range []string{"/" + ns + "/nosuch/jwks.json", "/nosuch/native/jwks.json"} {
		if resp, _ := get(t, "http://"+mgr.serverAddr+path); resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

// TestServerServesOnAReplicaThatDoesNotLead: every replica of the manager serves JWK Sets,
// the ones waiting for the leader lease too. The server reads the controller's private
// caches (published ConfigMaps, issuer claims); were those started only by the replica
// that leads, a standby replica would never serve (or stop on reading a cache that had not
// started).
func TestServerServesOnAReplicaThatDoesNotLead(t *testing.T) {
	startManager(t) // the replica that leads (no election here) and publishes
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "standby", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Issuer = "https://" + ns + ".standby.example" })
	waitReady(t, ns, "standby", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)

	// Another replica holds the lease for an hour: this one never leads.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trustplane-standby"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	if err := env.Client.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.ServerBindAddress = testenv.FreeAddr(t)
	env.RunManager(t, func(mgr ctrl.Manager) error {
		_, err := Setup(mgr, opts)
		return err
	}, func(o *ctrl.Options) {
		o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID = true, ns, lease.Name
	})

	url := "http://" + opts.ServerBindAddress + "/" + ns + "/standby/jwks.json"
	testenv.Eventually(t, "the standby replica to serve the published set", 30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(body) == getConfigMap(t, ns, "standby-jwks").Data[jwkset.DocumentKey]
	})
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(lease), lease); err != nil || *lease.Spec.HolderIdentity != "the-leader" {
		t.Fatalf("the lease changed hands (%v): the test no longer shows a standby replica", err)
	}
}
