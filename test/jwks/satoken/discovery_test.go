package satoken

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// federationAudience is the audience a cloud federation (an STS) asks service-account
// tokens for, and the client ID its verifier expects.
const federationAudience = "sts.example.com"

// TestDiscoveryAgreesAndGoOIDCVerifies (issue 42): kube-apiserver v1.37.1 signing through
// the signer, with --service-account-issuer naming an https issuer that trustplane's
// server serves (spec.issuer) behind a real nginx TLS proxy. With an RSA key, then with a
// P-256 key rotated in beside it: both discovery documents name the same issuer, and
// kube-apiserver's /openid/v1/jwks and the document at trustplane's jwks_uri hold the same
// keys (kid, kty, key material). A TokenRequest token signed with each key verifies with
// go-oidc v3 through trustplane's discovery, and that verifier refuses tokens signed with
// keys the set does not hold, under its kids or another, while it accepts the same claims
// signed with the published keys.
func TestDiscoveryAgreesAndGoOIDCVerifies(t *testing.T) {
	ns := env.Namespace(t, "discovery")
	proxyTLS := testenv.NewProxyTLS(t)
	proxy, server := testenv.FreeAddr(t), testenv.FreeAddr(t)
	issuer := "https://" + proxy + "/sa"

	first := newKeySecret(t, ns, "sa-tls", testcerts.RSA2048)
	keys := map[string]crypto.Signer{first: secretKey(t, ns, "sa-tls")}
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "sa-tls", SigningSecret: "sa-signing", Issuer: issuer,
			CacheMaxAge: jwksv1alpha1.DurationOf(cacheMaxAge), Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	startServingManager(t, server)
	testenv.Eventually(t, "the first key published and copied to the signing Secret", 60*time.Second, func() bool {
		return slices.Contains(publishedKids(t, ns, "sa"), first) && kidOfSecret(t, ns, "sa-signing") == first
	})
	testenv.StartNginx(t, proxyTLS.Conf+testenv.PathPreservingProxy(proxy, server))
	socket := filepath.Join(shortDir(t), "signer.sock")
	startSigner(t, socket, ns+"/sa", "")
	kas := startKubeAPIServerIssuing(t, socket, issuer)
	sa := newServiceAccount(t, kas)
	rp := relyingParty{ctx: oidc.ClientContext(context.Background(), proxyTLS.Client), issuer: issuer,
		subject: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}

	set := discoveryAgrees(t, kas, proxyTLS.Client, issuer, ns, "sa")
	before := rp.discover(t)
	rp.verify(t, before, requestAudienceToken(t, kas, sa), first)
	rp.refusesKeysNotInSet(t, before, set, keys)

	// A second key, of another type: published at once, signing once promoted.
	second := rotate(t, ns, "sa-tls", testcerts.P256)
	keys[second] = secretKey(t, ns, "sa-tls")
	testenv.Eventually(t, "both keys published", 30*time.Second, func() bool {
		return slices.Equal(slices.Sorted(slices.Values(publishedKids(t, ns, "sa"))), slices.Sorted(maps.Keys(keys)))
	})
	set = discoveryAgrees(t, kas, proxyTLS.Client, issuer, ns, "sa")
	if !slices.Equal(kidsOfSet(set), slices.Sorted(maps.Keys(keys))) {
		t.Fatalf("after the rotation trustplane serves %v, want %v", kidsOfSet(set), slices.Sorted(maps.Keys(keys)))
	}
	// A relying party that discovers the issuer now.
	after := rp.discover(t)
	rp.refusesKeysNotInSet(t, after, set, keys)
	testenv.Eventually(t, "the second key promoted", 60*time.Second, func() bool { return kidOfSecret(t, ns, "sa-signing") == second })
	var tok string
	testenv.Eventually(t, "kube-apiserver's tokens signed with the promoted key (the signer's watch)", 10*time.Second, func() bool {
		tok = requestAudienceToken(t, kas, sa)
		return kidOfToken(t, tok) == second
	})
	rp.verify(t, after, tok, second)
	// go-oidc's Provider keeps the signing algorithms of the document it discovered: the
	// verifier made before the rotation (RS256 only) may refuse an ES256 token. Logged, as
	// it is go-oidc's behaviour, not the issuer's.
	if _, err := before.Verify(rp.ctx, tok); err != nil {
		t.Logf("the verifier discovered before the rotation refuses the new key's token: %v", err)
	} else {
		t.Logf("the verifier discovered before the rotation accepts the new key's token")
	}
}

// relyingParty verifies service-account tokens as a cloud federation does: go-oidc v3
// discovering the issuer through the TLS proxy (ctx carries the client trusting its CA).
type relyingParty struct {
	ctx             context.Context
	issuer, subject string
}

// discover is go-oidc's verifier for federationAudience, from the issuer's discovery.
func (rp relyingParty) discover(t *testing.T) *oidc.IDTokenVerifier {
	t.Helper()
	provider, err := oidc.NewProvider(rp.ctx, rp.issuer)
	if err != nil {
		t.Fatalf("go-oidc discovery of %s: %v", rp.issuer, err)
	}
	var claims struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	t.Logf("go-oidc discovered %s: signing algorithms %v", rp.issuer, claims.Algs)
	return provider.Verifier(&oidc.Config{ClientID: federationAudience})
}

// verify fails unless token, from kube-apiserver, has kid and verifies, naming the issuer,
// the ServiceAccount and the audience.
func (rp relyingParty) verify(t *testing.T, v *oidc.IDTokenVerifier, token, kid string) {
	t.Helper()
	if got := kidOfToken(t, token); got != kid {
		t.Fatalf("kube-apiserver's token has kid %s, want the signing key's %s", got, kid)
	}
	idToken, err := v.Verify(rp.ctx, token)
	if err != nil {
		t.Fatalf("go-oidc refused kube-apiserver's token (kid %s): %v", kid, err)
	}
	if idToken.Issuer != rp.issuer || idToken.Subject != rp.subject || !slices.Equal(idToken.Audience, []string{federationAudience}) {
		t.Errorf("verified token: iss %q, sub %q, aud %v", idToken.Issuer, idToken.Subject, idToken.Audience)
	}
	t.Logf("go-oidc verified kube-apiserver's token of kid %s through %s/.well-known/openid-configuration", kid, rp.issuer)
}

// refusesKeysNotInSet: for each key of set, the verifier accepts the relying party's
// claims signed with it (keys holds the private keys) and refuses them signed with a new
// key of the same type under that kid and alg; and refuses them under a kid not in set.
func (rp relyingParty) refusesKeysNotInSet(t *testing.T, v *oidc.IDTokenVerifier, set []map[string]any, keys map[string]crypto.Signer) {
	t.Helper()
	for _, k := range set {
		kid, _ := k["kid"].(string)
		alg, _ := k["alg"].(string)
		if _, err := v.Verify(rp.ctx, signAs(t, keys[kid], kid, alg, rp.issuer, rp.subject)); err != nil {
			t.Fatalf("the same claims signed with the published key %s (%s) refused: %v", kid, alg, err)
		}
		if _, err := v.Verify(rp.ctx, signAs(t, newKeyLike(t, k), kid, alg, rp.issuer, rp.subject)); err == nil {
			t.Errorf("a token signed with a key not in the set, under the published kid %s (%s), was accepted", kid, alg)
		} else {
			t.Logf("a key not in the set, under the published kid %s (%s): refused: %v", kid, alg, err)
		}
		if _, err := v.Verify(rp.ctx, signAs(t, newKeyLike(t, k), "not-published", alg, rp.issuer, rp.subject)); err == nil {
			t.Errorf("a token signed with a key not in the set, under an unpublished kid (%s), was accepted", alg)
		} else {
			t.Logf("a key not in the set, under an unpublished kid (%s): refused: %v", alg, err)
		}
	}
}

// discoveryAgrees waits until kube-apiserver's /openid/v1/jwks and the document at the
// jwks_uri of trustplane's discovery (through the proxy) hold the JWKSConfig's published
// set, then compares them and both discovery documents: the same issuer (issuer),
// trustplane's jwks_uri <issuer>/jwks.json, the same response, subject and signing
// algorithm values in any order, and the same keys. It logs every field that differs and
// returns trustplane's keys.
func discoveryAgrees(t *testing.T, kas *rest.Config, proxyClient *http.Client, issuer, ns, name string) []map[string]any {
	t.Helper()
	waitDiscoveryMatches(t, kas, ns, name)
	published := slices.Sorted(slices.Values(publishedKids(t, ns, name)))
	var trustplaneDoc map[string]any
	var trustplaneSet []map[string]any
	testenv.Eventually(t, "trustplane's server to serve the published set at the issuer's jwks_uri", 30*time.Second, func() bool {
		if getJSON(t, proxyClient, issuer+"/.well-known/openid-configuration", &trustplaneDoc) != nil {
			return false
		}
		uri, _ := trustplaneDoc["jwks_uri"].(string)
		var set struct{ Keys []map[string]any }
		if uri == "" || getJSON(t, proxyClient, uri, &set) != nil {
			return false
		}
		trustplaneSet = set.Keys
		return slices.Equal(kidsOfSet(set.Keys), published)
	})
	var kasDoc map[string]any
	var kasSet struct{ Keys []map[string]any }
	kasJSON(t, kas, "/.well-known/openid-configuration", &kasDoc)
	kasJSON(t, kas, "/openid/v1/jwks", &kasSet)

	if kasDoc["issuer"] != issuer || trustplaneDoc["issuer"] != issuer {
		t.Errorf("issuer: kube-apiserver %q, trustplane %q, want both %q", kasDoc["issuer"], trustplaneDoc["issuer"], issuer)
	}
	if trustplaneDoc["jwks_uri"] != issuer+"/jwks.json" {
		t.Errorf("trustplane's jwks_uri %q, want %s/jwks.json", trustplaneDoc["jwks_uri"], issuer)
	}
	for _, field := range []string{"response_types_supported", "subject_types_supported", "id_token_signing_alg_values_supported"} {
		if !sameElements(kasDoc[field], trustplaneDoc[field]) {
			t.Errorf("%s: kube-apiserver %v, trustplane %v", field, kasDoc[field], trustplaneDoc[field])
		}
	}
	logDifferences(t, "discovery document", kasDoc, trustplaneDoc)
	compareSets(t, kasSet.Keys, trustplaneSet)
	return trustplaneSet
}

// startServingManager runs the manager binary with the jwks controller only, its JWKS
// server at server, trusting the nginx in front of it (127.0.0.1) for X-Forwarded-Host.
func startServingManager(t *testing.T, server string) {
	t.Helper()
	probes := testenv.FreeAddr(t)
	p := testenv.StartProcess(t, testenv.Binary(t), "manager", "--controllers=jwks", "--leader-elect=false",
		"--kubeconfig="+env.AdminKubeconfig(t), "--metrics-bind-address=0", "--health-probe-bind-address="+probes,
		"--jwks-server-bind-address="+server, "--jwks-server-trusted-proxies=127.0.0.1/32", "--jwks-promotion-margin=2s")
	p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
}

// startKubeAPIServerIssuing is startKubeAPIServer with --service-account-issuer=issuer:
// the cluster's issuer, which the JWKSConfig's spec.issuer names.
func startKubeAPIServerIssuing(t *testing.T, socket, issuer string) *rest.Config {
	t.Helper()
	kas := &envtest.Environment{BinaryAssetsDirectory: env.Environment().BinaryAssetsDirectory}
	args := kas.ControlPlane.GetAPIServer().Configure()
	args.Disable("service-account-key-file")
	args.Disable("service-account-signing-key-file")
	args.Set("service-account-signing-endpoint", socket)
	args.Set("service-account-issuer", issuer)
	cfg, err := kas.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver with --service-account-issuer=%s: %v", issuer, err)
	}
	t.Cleanup(func() { _ = kas.Stop() })
	return cfg
}

// requestAudienceToken is a TokenRequest token of sa for federationAudience.
func requestAudienceToken(t *testing.T, cfg *rest.Config, sa *corev1.ServiceAccount) string {
	t.Helper()
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(sa.Namespace).CreateToken(context.Background(), sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{federationAudience}, ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for audience %s: %v", federationAudience, err)
	}
	return tr.Status.Token
}

// getJSON decodes what url answers (200 only).
func getJSON(t *testing.T, c *http.Client, url string, into any) error {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, into)
}

// kasJSON decodes what kube-apiserver answers at path.
func kasJSON(t *testing.T, cfg *rest.Config, path string, into any) {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(cfg).RESTClient().Get().AbsPath(path).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("kube-apiserver's %s: %v", path, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("kube-apiserver's %s: %v: %s", path, err, raw)
	}
}

func kidsOfSet(keys []map[string]any) []string {
	kids := make([]string, 0, len(keys))
	for _, k := range keys {
		kid, _ := k["kid"].(string)
		kids = append(kids, kid)
	}
	slices.Sort(kids)
	return kids
}

// sameElements says whether two JSON arrays hold the same values, in any order.
func sameElements(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if !aok || !bok || len(as) != len(bs) {
		return false
	}
	strs := func(vs []any) []string {
		out := make([]string, 0, len(vs))
		for _, v := range vs {
			out = append(out, fmt.Sprint(v))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(strs(as), strs(bs))
}

// keyMaterial are the fields of a JWK that are its public key, by kty.
var keyMaterial = map[string][]string{"EC": {"crv", "x", "y"}, "RSA": {"n", "e"}}

// compareSets fails unless both sets hold the same kids, each with the same kty and key
// material; it logs every other field that differs.
func compareSets(t *testing.T, kas, trustplane []map[string]any) {
	t.Helper()
	if !slices.Equal(kidsOfSet(kas), kidsOfSet(trustplane)) {
		t.Fatalf("kids: kube-apiserver's /openid/v1/jwks %v, trustplane's jwks_uri %v", kidsOfSet(kas), kidsOfSet(trustplane))
	}
	byKid := map[string]map[string]any{}
	for _, k := range trustplane {
		byKid[k["kid"].(string)] = k
	}
	for _, k := range kas {
		kid := k["kid"].(string)
		tp := byKid[kid]
		kty, _ := k["kty"].(string)
		material, known := keyMaterial[kty]
		if !known || tp["kty"] != kty {
			t.Errorf("kid %s: kty kube-apiserver %v, trustplane %v", kid, k["kty"], tp["kty"])
			continue
		}
		for _, f := range material {
			if k[f] == nil || k[f] != tp[f] {
				t.Errorf("kid %s (%s): %s kube-apiserver %v, trustplane %v", kid, kty, f, k[f], tp[f])
			}
		}
		logDifferences(t, "key "+kid, k, tp)
	}
}

// logDifferences logs each field of two JSON objects that differs or that only one has.
func logDifferences(t *testing.T, what string, kas, trustplane map[string]any) {
	t.Helper()
	union := maps.Clone(kas)
	maps.Copy(union, trustplane)
	fields := slices.Sorted(maps.Keys(union))
	same := []string{}
	for _, f := range fields {
		a, inKAS := kas[f]
		b, inTP := trustplane[f]
		switch {
		case !inKAS:
			t.Logf("%s: %s only in trustplane's (%s)", what, f, brief(b))
		case !inTP:
			t.Logf("%s: %s only in kube-apiserver's (%s)", what, f, brief(a))
		case !reflect.DeepEqual(a, b):
			t.Logf("%s: %s differs: kube-apiserver %s, trustplane %s", what, f, brief(a), brief(b))
		default:
			same = append(same, f)
		}
	}
	t.Logf("%s: equal in both: %s", what, strings.Join(same, ", "))
}

func brief(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// secretKey is the private key a kubernetes.io/tls Secret holds now.
func secretKey(t *testing.T, ns, name string) crypto.Signer {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	return pair.PrivateKey.(crypto.Signer)
}

// newKeyLike is a new key of the JWK's type (RSA, or EC on its curve).
func newKeyLike(t *testing.T, jwk map[string]any) crypto.Signer {
	t.Helper()
	kt := testcerts.RSA2048
	if jwk["kty"] == "EC" {
		kt = map[any]testcerts.KeyType{"P-256": testcerts.P256, "P-384": testcerts.P384, "P-521": testcerts.P521}[jwk["crv"]]
	}
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatalf("a key like %v: %v", jwk["kid"], err)
	}
	return key
}

// signAs is a token for federationAudience with iss issuer and sub subject, signed by key
// under kid and alg.
func signAs(t *testing.T, key crypto.Signer, kid, alg, issuer, subject string) string {
	t.Helper()
	token, err := testcerts.SignJWT(key, kid, alg, issuer, federationAudience, subject)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
