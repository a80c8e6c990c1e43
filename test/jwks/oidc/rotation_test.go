package oidc

import (
	"context"
	"crypto"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// cacheMaxAge is what the rotation test's sets say: kube-apiserver's key set (go-oidc
// v2's remoteKeySet) refetches an unknown kid only within 30 s of the cache's expiry, so
// a key published into a set it fetched just before is refused for cacheMaxAge - 30 s.
const cacheMaxAge = 40 * time.Second

// TestKubeAPIServerRefusesNoTokenAcrossRotation: kube-apiserver v1.37.1, with a jwt issuer
// for each of two JWKSConfigs behind a real nginx TLS proxy, and a signer that signs a
// token every 250 ms with the key a Secret holds at that moment. Just after
// kube-apiserver refreshed its cached set, the certificate Secret is rotated. With
// spec.signingSecret (the signer reads it) no token is refused, across a second rotation
// during the wait and a restart of the manager during the wait, and a token signed with
// the previous key is still accepted afterwards. Without it (the signer reads the
// certificate Secret, as before) tokens are refused until kube-apiserver refetches.
func TestKubeAPIServerRefusesNoTokenAcrossRotation(t *testing.T) {
	ns := env.Namespace(t, "rotation")
	proxyTLS := testenv.NewProxyTLS(t)
	proxy := testenv.FreeAddr(t)
	server := testenv.FreeAddr(t)
	restart := startManagerAt(t, server, "--jwks-promotion-margin=2s")
	issuers := map[string]string{"with": "https://" + proxy + "/with", "without": "https://" + proxy + "/without"}
	first := map[string]signingKey{}
	for name, issuer := range issuers {
		first[name] = newSigningKey(t, ns, name+"-tls")
		cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: name + "-tls", Issuer: issuer, CacheMaxAge: jwksv1alpha1.DurationOf(cacheMaxAge),
				Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
		if name == "with" {
			cfg.Spec.SigningSecret = "with-signing"
		}
		if err := env.Client.Create(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		waitServed(t, server, ns, name, first[name].kid)
	}
	testenv.StartNginx(t, proxyTLS.Conf+testenv.PathPreservingProxy(proxy, server))
	relyingParty := startKubeAPIServer(t, proxyTLS.CAPEM, issuers["with"], issuers["without"])

	t.Run("with a signing Secret", func(t *testing.T) {
		s := startSigner(t, relyingParty, issuers["with"], ns, "with-signing")
		refreshKeySet(t, relyingParty, issuers["with"])
		rotate(t, ns, "with-tls")
		time.Sleep(5 * time.Second)
		rotate(t, ns, "with-tls") // a second rotation during the wait
		time.Sleep(5 * time.Second)
		restart() // the manager dies during the wait
		final := currentKid(t, ns, "with-tls")
		testenv.Eventually(t, "the last key promoted", 2*time.Minute, func() bool { return currentKid(t, ns, "with-signing") == final })
		time.Sleep(3 * time.Second)
		sent, refused, window := s.stop()
		t.Logf("with a signing Secret: %d tokens, %d refused (%v); promoted %s", sent, refused, window, final)
		if sent < 100 || refused > 0 {
			t.Errorf("%d of %d tokens refused", refused, sent)
		}
		if !accepted(t, relyingParty, signToken(t, issuers["with"], first["with"])) {
			t.Error("a token signed with the previous signing key, still in the set, was refused")
		}
	})
	t.Run("without a signing Secret", func(t *testing.T) {
		s := startSigner(t, relyingParty, issuers["without"], ns, "without-tls")
		refreshKeySet(t, relyingParty, issuers["without"])
		rotate(t, ns, "without-tls")
		time.Sleep(cacheMaxAge - 30*time.Second + 5*time.Second)
		sent, refused, window := s.stop()
		t.Logf("without a signing Secret: %d tokens, %d refused over %v", sent, refused, window)
		if refused == 0 {
			t.Errorf("no token refused: the test does not show the window it closes (%d sent)", sent)
		}
	})
}

// startManagerAt runs the manager with only the jwks controller, its server at server;
// restart stops it and starts another one there.
func startManagerAt(t *testing.T, server string, extra ...string) (restart func()) {
	t.Helper()
	kubeconfig := env.AdminKubeconfig(t)
	start := func() *testenv.Process {
		probes := testenv.FreeAddr(t)
		p := testenv.StartProcess(t, testenv.Binary(t), append([]string{"manager", "--controllers=jwks", "--leader-elect=false",
			"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=" + probes,
			"--jwks-server-bind-address=" + server, "--jwks-server-trusted-proxies=127.0.0.1/32"}, extra...)...)
		p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
		return p
	}
	p := start()
	return func() {
		if _, err := p.Stop(30 * time.Second); err != nil {
			t.Logf("stopping the manager: %v", err)
		}
		p = start()
	}
}

// startKubeAPIServer starts a second kube-apiserver (and etcd) whose structured
// authentication configuration has a jwt issuer for each URL, reached through the proxy
// with caPEM, audience relying-party, username "jwt:" + sub.
func startKubeAPIServer(t *testing.T, caPEM []byte, issuers ...string) *rest.Config {
	t.Helper()
	var jwt strings.Builder
	for _, issuer := range issuers {
		fmt.Fprintf(&jwt, `- issuer:
    url: %s
    audiences: [%s]
    certificateAuthority: |
%s
  claimMappings:
    username: {claim: sub, prefix: "jwt:"}
`, issuer, audience, indent(string(caPEM), "      "))
	}
	path := filepath.Join(t.TempDir(), "authentication.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n"+jwt.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	rp := &envtest.Environment{BinaryAssetsDirectory: env.Environment().BinaryAssetsDirectory}
	rp.ControlPlane.GetAPIServer().Configure().Set("authentication-config", path)
	cfg, err := rp.Start()
	if err != nil {
		t.Fatalf("starting the relying party's kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = rp.Stop() })
	return cfg
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// accepted says whether kube-apiserver authenticates token (a SelfSubjectReview).
func accepted(t *testing.T, cfg *rest.Config, token string) bool {
	t.Helper()
	anon := rest.AnonymousClientConfig(cfg)
	anon.BearerToken = token
	anon.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsUnauthorized(err) {
		t.Logf("SelfSubjectReview: %v", err)
	}
	return err == nil
}

// refreshKeySet has kube-apiserver fetch the issuer's set now (a token with an unknown
// kid, once its cache is due), so that the rotation lands in a freshly cached set.
func refreshKeySet(t *testing.T, cfg *rest.Config, issuer string) {
	t.Helper()
	stranger := newSigningKey(t, "", "")
	accepted(t, cfg, signToken(t, issuer, stranger))
}

// signer signs a token every 250 ms with the key a Secret holds at that moment, and
// counts what kube-apiserver refuses.
type signer struct {
	mu                   sync.Mutex
	sent, refused        int
	firstRef, lastRefuse time.Time
	done                 chan struct{}
	wg                   sync.WaitGroup
}

func startSigner(t *testing.T, cfg *rest.Config, issuer, ns, secret string) *signer {
	t.Helper()
	s := &signer{done: make(chan struct{})}
	testenv.Eventually(t, "kube-apiserver to accept the issuer's tokens", 90*time.Second, func() bool {
		return accepted(t, cfg, signToken(t, issuer, keyOf(t, ns, secret)))
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			ok := accepted(t, cfg, signToken(t, issuer, keyOf(t, ns, secret)))
			s.mu.Lock()
			s.sent++
			if !ok {
				if s.refused == 0 {
					s.firstRef = time.Now()
				}
				s.refused++
				s.lastRefuse = time.Now()
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the signer: tokens sent, refused, and how long refusals lasted.
func (s *signer) stop() (sent, refused int, window time.Duration) {
	close(s.done)
	s.wg.Wait()
	if s.refused > 0 {
		window = s.lastRefuse.Sub(s.firstRef)
	}
	return s.sent, s.refused, window
}

// keyOf reads the signing key a kubernetes.io/tls Secret holds now.
func keyOf(t *testing.T, ns, name string) signingKey {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	kid, err := jwkset.KeyIDOf(secret.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{key: pair.PrivateKey.(crypto.Signer), kid: kid, alg: string(jose.ES256)}
}

func currentKid(t *testing.T, ns, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return ""
	}
	kid, _ := jwkset.KeyIDOf(secret.Data[corev1.TLSCertKey])
	return kid
}

// rotate gives the certificate Secret a new key, as cert-manager does on renewal.
func rotate(t *testing.T, ns, name string) {
	t.Helper()
	chain, err := testcerts.NewChain(mustKey(t), "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}
