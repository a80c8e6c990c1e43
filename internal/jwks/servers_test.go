package jwks

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestNoKeySignsBeforeEveryServerAnswersIt: `trustplane jwks-server` cut off from the API
// server goes on answering the set it read last. A key published meanwhile is copied to
// the signing Secret only cacheMaxAge + margin after that server stopped answering
// without it (its report ran out, so it stopped answering before), never while it does.
// test/chaos found a standalone server whose watch lagged a minute after kube-apiserver
// restarts (client-go's backoff) answering sets without a key that had been promoted
// meanwhile: the controller timed the promotion from its own cache alone.
func TestNoKeySignsBeforeEveryServerAnswersIt(t *testing.T) {
	const maxAge, margin = 2 * time.Second, time.Second
	startManager(t, func(o *Options) { o.PromotionMargin = margin })
	ns := newNamespace(t)
	chains := []testcerts.Chain{newChain(t, testcerts.P256), newChain(t, testcerts.P256)}
	kid := func(i int) string { k, _ := expectedDoc(t, chains[i]); return k }
	putSecret(t, ns, "tls", tlsData(chains[0]))

	// The standalone server reaches the API server through a proxy the test cuts.
	proxy := newCutProxy(t, env.Config.Host)
	standalone := startStandaloneServer(t, proxy.Addr)
	setURL := "http://" + standalone + "/" + ns + "/idp/jwks.json"

	newJWKSConfig(t, ns, "idp", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.SigningSecret = "idp-signing"
		c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(maxAge)
		c.Spec.Nginx.Enabled = ptrTo(false)
	})
	testenv.Eventually(t, "the first key signing and served by the standalone server", 30*time.Second, func() bool {
		status, kids := askSet(setURL)
		return signingKid(t, ns, "idp-signing") == kid(0) && status == http.StatusOK && slices.Contains(kids, kid(0))
	})

	proxy.cut()
	cutAt := time.Now()
	putSecret(t, ns, "tls", tlsData(chains[1]))

	// Sample the standalone server until the new key signs.
	type sampled struct {
		start  time.Time
		status int
		kids   []string
	}
	var answers []sampled
	var promoted time.Time
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		status, kids := askSet(setURL)
		answers = append(answers, sampled{start, status, kids})
		if signingKid(t, ns, "idp-signing") == kid(1) {
			promoted = time.Now()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if promoted.IsZero() {
		t.Fatalf("the new key was never promoted within a minute of the cut (%d answers sampled)", len(answers))
	}
	// Every answer that served a set without the new key began at least cacheMaxAge +
	// margin before the promotion: a relying party that cached it had refetched by then.
	var last time.Time
	for _, a := range answers {
		if a.status == http.StatusOK && !slices.Contains(a.kids, kid(1)) {
			last = a.start
		}
	}
	if before := promoted.Sub(last); !last.IsZero() && before < maxAge+margin {
		t.Fatalf("the standalone server answered a set without the new key %v before that key was promoted (%v after the cut), less than cacheMaxAge + margin (%v): relying parties that fetched it refuse the tokens signed with it",
			before.Round(time.Millisecond), promoted.Sub(cutAt).Round(time.Millisecond), maxAge+margin)
	}
	t.Logf("promoted %v after the cut; the standalone server's last answer without the key %v before", promoted.Sub(cutAt).Round(time.Millisecond), promoted.Sub(last).Round(time.Millisecond))
}

// askSet asks a JWKS server for a set: the status (0 without an answer) and the kids.
func askSet(setURL string) (int, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, setURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var set struct {
		Keys []struct {
			KeyID string `json:"kid"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(body, &set)
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.KeyID)
	}
	return resp.StatusCode, kids
}

// startStandaloneServer runs the JWKS server alone, as `trustplane jwks-server` does
// (SetupServer), reaching the API server at apiServer (host:port); it returns its
// address. It runs until the test ends or it stops by itself; its Lease is deleted then.
func startStandaloneServer(t *testing.T, apiServer string) string {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = (&url.URL{Scheme: "https", Host: apiServer}).String()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.ServerBindAddress = testenv.FreeAddr(t)
	if _, err := SetupServer(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx) // cut off long enough, it stops by itself
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		// A server that stopped by itself leaves its Lease (jwks.trustplane.io/server), run
		// out: the next tests need not see it.
		leases := &coordinationv1.LeaseList{}
		if err := env.Client.List(context.Background(), leases, client.InNamespace(opts.IssuerClaimNamespace), client.HasLabels{"jwks.trustplane.io/server"}); err == nil {
			for i := range leases.Items {
				l := &leases.Items[i]
				if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil &&
					l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second).Before(time.Now()) {
					_ = env.Client.Delete(context.Background(), l)
				}
			}
		}
	})
	testenv.Eventually(t, "the standalone JWKS server to answer", 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", opts.ServerBindAddress, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return opts.ServerBindAddress
}

// cutProxy is a TCP proxy to the API server that the test can cut: every connection
// closed, new ones refused, as a network partition looks to a client.
type cutProxy struct {
	Addr   string
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{Addr: l.Addr().String(), target: u.Host}
	t.Cleanup(func() { _ = l.Close(); p.cut() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go p.pipe(in)
		}
	}()
	return p
}

func (p *cutProxy) pipe(in net.Conn) {
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns = append(p.conns, in, out)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

// cut closes every connection and refuses new ones from now on.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
