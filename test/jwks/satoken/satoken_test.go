// Package satoken runs kube-apiserver v1.37.1 with its service account token signing
// delegated to `trustplane jwt-signer` (--service-account-signing-endpoint), the process
// built from ./cmd/trustplane. The JWKSConfig, its Secrets and its published set live in
// the package's test control plane, where the manager (`manager --controllers=jwks`, the
// binary) publishes and rotates them and the signer reads them; a second kube-apiserver
// signs through the signer and checks the tokens it issued (TokenRequest, TokenReview,
// /openid/v1/jwks).
package satoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/jwtsigner"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// cacheMaxAge is the JWKSConfigs' spec.cacheMaxAge: the signer's refresh hint, and (with
// --jwks-promotion-margin=2s) how long a new key is published before it signs.
const cacheMaxAge = 10 * time.Second

// TestTokensAcrossRotation: kube-apiserver starts against the signer, issues tokens that
// it authenticates, and publishes at /openid/v1/jwks exactly the JWKSConfig's set. The
// certificate Secret then gets a new key: tokens requested every 250 ms before, during
// and after the promotion all authenticate, before and after it, and the new key signs
// only once it is published. A restarted signer serves the same keys.
func TestTokensAcrossRotation(t *testing.T) {
	ns := env.Namespace(t, "satoken")
	first := newKeySecret(t, ns, "sa-tls", testcerts.P256)
	createJWKSConfig(t, ns, "sa", "sa-tls", "sa-signing")
	startManager(t)
	testenv.Eventually(t, "the first key published and copied to the signing Secret", 60*time.Second, func() bool {
		return slices.Contains(publishedKids(t, ns, "sa"), first) && kidOfSecret(t, ns, "sa-signing") == first
	})

	stateDir := shortDir(t)
	socket := filepath.Join(shortDir(t), "signer.sock")
	signer := startSigner(t, socket, ns+"/sa", stateDir)
	kas := startKubeAPIServer(t, socket)
	sa := newServiceAccount(t, kas)

	tok, err := requestToken(kas, sa)
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	if kid := kidOfToken(t, tok); kid != first {
		t.Errorf("the token's kid is %s, want the signing key's %s", kid, first)
	}
	if user := review(t, kas, tok); user != "system:serviceaccount:"+sa.Namespace+":"+sa.Name {
		t.Fatalf("TokenReview of a fresh token: %q", user)
	}
	waitDiscoveryMatches(t, kas, ns, "sa")

	// The rotation: a new key in the certificate Secret, as cert-manager renews it.
	issued := []string{tok}
	byKid := map[string]int{}
	refusedAtIssue := 0
	second := rotate(t, ns, "sa-tls", testcerts.P256)
	start := time.Now()
	promoted := time.Time{}
	for promoted.IsZero() || time.Since(promoted) < 5*time.Second {
		if promoted.IsZero() && kidOfSecret(t, ns, "sa-signing") == second {
			promoted = time.Now()
			t.Logf("the new key %s was promoted %v after the rotation", second, promoted.Sub(start).Round(time.Millisecond))
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatal("the new key was not promoted within 2 minutes")
		}
		tok, err := requestToken(kas, sa)
		if err != nil {
			t.Errorf("TokenRequest during the rotation: %v", err)
			continue
		}
		issued = append(issued, tok)
		byKid[kidOfToken(t, tok)]++
		if review(t, kas, tok) == "" {
			refusedAtIssue++
		}
		time.Sleep(250 * time.Millisecond)
	}
	refusedAfter := 0
	for _, tok := range issued {
		if review(t, kas, tok) == "" {
			refusedAfter++
		}
	}
	t.Logf("across the rotation: %d tokens issued, %d signed with the first key %s, %d with the second %s; %d refused when issued, %d refused after the promotion",
		len(issued), byKid[first]+1, first, byKid[second], second, refusedAtIssue, refusedAfter)
	if byKid[first] == 0 || byKid[second] == 0 || refusedAtIssue > 0 || refusedAfter > 0 {
		t.Errorf("want tokens of both keys and none refused")
	}
	if others := len(issued) - 1 - byKid[first] - byKid[second]; others != 0 {
		t.Errorf("%d tokens signed with a key that is neither", others)
	}
	waitDiscoveryMatches(t, kas, ns, "sa")

	// The state the signer keeps, then a restart: the same keys, old tokens still good.
	info, err := os.Stat(filepath.Join(stateDir, jwtsigner.StateFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v", info, err)
	}
	before := discoveryKids(t, kas)
	if _, err := signer.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the signer: %v", err)
	}
	startSigner(t, socket, ns+"/sa", stateDir)
	tok, err = requestToken(kas, sa)
	if err != nil {
		t.Fatalf("TokenRequest after the signer's restart: %v", err)
	}
	if kidOfToken(t, tok) != second || review(t, kas, tok) == "" {
		t.Errorf("after the restart: kid %s, want %s, authenticated", kidOfToken(t, tok), second)
	}
	refusedAfterRestart := 0
	for _, old := range issued {
		if review(t, kas, old) == "" {
			refusedAfterRestart++
		}
	}
	after := discoveryKids(t, kas)
	t.Logf("after the signer's restart: %d of %d earlier tokens refused; /openid/v1/jwks %v (before %v)", refusedAfterRestart, len(issued), after, before)
	if refusedAfterRestart > 0 || !slices.Equal(before, after) {
		t.Errorf("the restart changed the keys")
	}
}

// TestSigningKeyNotPublished: a signer whose signing key is not in the published set (the
// certificate Secret got a new key while no manager ran to publish it) lets
// kube-apiserver start, and its TokenRequest fails with the signer's reason: no token.
func TestSigningKeyNotPublished(t *testing.T) {
	ns := env.Namespace(t, "unpublished")
	first := newKeySecret(t, ns, "sa-tls", testcerts.RSA2048)
	createJWKSConfig(t, ns, "sa", "sa-tls", "")
	stop := startManager(t)
	testenv.Eventually(t, "the first key published", 60*time.Second, func() bool { return slices.Contains(publishedKids(t, ns, "sa"), first) })
	if _, err := stop.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	second := rotate(t, ns, "sa-tls", testcerts.RSA2048)

	socket := filepath.Join(shortDir(t), "signer.sock")
	startSigner(t, socket, ns+"/sa", "")
	kas := startKubeAPIServer(t, socket)
	sa := newServiceAccount(t, kas)
	tok, err := requestToken(kas, sa)
	if err == nil || tok != "" {
		t.Fatalf("TokenRequest with an unpublished signing key gave a token (%d bytes), err %v", len(tok), err)
	}
	if !strings.Contains(err.Error(), second) || !strings.Contains(err.Error(), "not in the published set") {
		t.Errorf("TokenRequest error does not say why: %v", err)
	}
	t.Logf("TokenRequest: %v", err)
	if got := discoveryKids(t, kas); !slices.Equal(got, []string{first}) {
		t.Errorf("/openid/v1/jwks %v, want the published %s", got, first)
	}
}

// shortDir is a temporary directory with a short path (a socket path has 107 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func newChain(t *testing.T, kt testcerts.KeyType) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "sa.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

// newKeySecret stores a new key as a kubernetes.io/tls Secret and returns its kid.
func newKeySecret(t *testing.T, ns, name string, kt testcerts.KeyType) string {
	t.Helper()
	chain := newChain(t, kt)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return kidOfSecret(t, ns, name)
}

// rotate gives the Secret a new key and returns its kid.
func rotate(t *testing.T, ns, name string, kt testcerts.KeyType) string {
	t.Helper()
	chain := newChain(t, kt)
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return kidOfSecret(t, ns, name)
}

func kidOfSecret(t *testing.T, ns, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return ""
	}
	kid, _ := jwkset.KeyIDOf(secret.Data[corev1.TLSCertKey])
	return kid
}

func createJWKSConfig(t *testing.T, ns, name, certificateSecret, signingSecret string) {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: certificateSecret, SigningSecret: signingSecret,
			CacheMaxAge: jwksv1alpha1.DurationOf(cacheMaxAge), Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// publishedKids are the kids of the JWKSConfig's published set, in its order.
func publishedKids(t *testing.T, ns, name string) []string {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jwkset.ConfigMapName(cfg)}, cm); err != nil {
		return nil
	}
	keys, err := jwkset.Unmarshal([]byte(cm.Data[jwkset.DocumentKey]))
	if err != nil {
		return nil
	}
	kids := make([]string, 0, len(keys))
	for _, k := range keys {
		kids = append(kids, k.KeyID)
	}
	return kids
}

// startManager runs the manager binary with the jwks controller only.
func startManager(t *testing.T) *testenv.Process {
	t.Helper()
	probes := testenv.FreeAddr(t)
	p := testenv.StartProcess(t, testenv.Binary(t), "manager", "--controllers=jwks", "--leader-elect=false",
		"--kubeconfig="+env.AdminKubeconfig(t), "--metrics-bind-address=0", "--health-probe-bind-address="+probes,
		"--jwks-server-bind-address="+testenv.FreeAddr(t), "--jwks-promotion-margin=2s")
	p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
	return p
}

// startSigner runs `trustplane jwt-signer` as config/jwt-signer/kube-apiserver.yaml runs
// it beside kube-apiserver (its args, with this test's socket, JWKSConfig, kubeconfig and
// state dir), as the user trustplane:jwt-signer that config/jwt-signer's Role, applied to
// the JWKSConfig's namespace, is bound to: not as admin. It waits for the socket.
func startSigner(t *testing.T, socket, jwksConfig, stateDir string) *testenv.Process {
	t.Helper()
	ns, _, _ := strings.Cut(jwksConfig, "/")
	objs := testenv.Rendered(t, "config/jwt-signer")
	for _, obj := range objs {
		obj.SetNamespace(ns)
	}
	env.Install(t, objs)
	container := testenv.ContainerOf(t, staticPod(t).Spec, "jwt-signer")
	args := testenv.ArgsOf(t, container, nil, "--socket="+socket, "--jwksconfig="+jwksConfig,
		"--kubeconfig="+signerKubeconfig(t), "--state-dir="+stateDir, "--health-probe-bind-address=0")
	p := testenv.StartProcess(t, testenv.Binary(t), args...)
	testenv.Eventually(t, "the signer's socket", 60*time.Second, func() bool {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the signer exited (%v):\n%s", err, p.Output())
		}
		info, err := os.Lstat(socket)
		return err == nil && info.Mode().Type() == os.ModeSocket
	})
	return p
}

// staticPod is config/jwt-signer/kube-apiserver.yaml: what the signer adds to
// kube-apiserver's static pod.
func staticPod(t *testing.T) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config/jwt-signer/kube-apiserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		t.Fatalf("config/jwt-signer/kube-apiserver.yaml: %v", err)
	}
	return pod
}

// signerKubeconfig is a kubeconfig of the user trustplane:jwt-signer, with a client
// certificate of the test control plane's CA, as the static pod's is.
func signerKubeconfig(t *testing.T) string {
	t.Helper()
	user, err := env.Environment().AddUser(envtest.User{Name: "trustplane:jwt-signer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trustplane-jwt-signer.conf")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStaticPodWiresTheSocket: in config/jwt-signer/kube-apiserver.yaml, kube-apiserver's
// --service-account-signing-endpoint is the signer's --socket, on a volume both mount,
// and the signer is a native sidecar (started before kube-apiserver, kept running).
func TestStaticPodWiresTheSocket(t *testing.T) {
	pod := staticPod(t)
	signer := testenv.ContainerOf(t, pod.Spec, "jwt-signer")
	kas := testenv.ContainerOf(t, pod.Spec, "kube-apiserver")
	socket := flagValue(signer.Args, "--socket")
	if socket == "" || flagValue(kas.Command, "--service-account-signing-endpoint") != socket {
		t.Errorf("kube-apiserver's --service-account-signing-endpoint is %q, the signer's --socket %q",
			flagValue(kas.Command, "--service-account-signing-endpoint"), socket)
	}
	if signer.RestartPolicy == nil || *signer.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("the signer is not a native sidecar")
	}
	dir := filepath.Dir(socket)
	mounts := func(c corev1.Container) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				return m.Name
			}
		}
		return ""
	}
	if mounts(signer) == "" || mounts(signer) != mounts(kas) {
		t.Errorf("the socket's directory %s is not one volume both containers mount", dir)
	}
}

// flagValue is the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// startKubeAPIServer starts a second kube-apiserver (and etcd) that signs service account
// tokens through the signer at socket.
func startKubeAPIServer(t *testing.T, socket string) *rest.Config {
	t.Helper()
	kas := &envtest.Environment{BinaryAssetsDirectory: env.Environment().BinaryAssetsDirectory}
	args := kas.ControlPlane.GetAPIServer().Configure()
	args.Disable("service-account-key-file")
	args.Disable("service-account-signing-key-file")
	args.Set("service-account-signing-endpoint", socket)
	cfg, err := kas.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver with --service-account-signing-endpoint: %v", err)
	}
	t.Cleanup(func() { _ = kas.Stop() })
	return cfg
}

func newServiceAccount(t *testing.T, cfg *rest.Config) *corev1.ServiceAccount {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "workload"}}
	sa, err := cs.CoreV1().ServiceAccounts("default").Create(context.Background(), sa, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// requestToken asks kube-apiserver for a token of sa (TokenRequest).
func requestToken(cfg *rest.Config, sa *corev1.ServiceAccount) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(context.Background(), sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// review is the user kube-apiserver authenticates token as (TokenReview), "" when it
// refuses it.
func review(t *testing.T, cfg *rest.Config, token string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	r, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Status.Authenticated {
		return ""
	}
	return r.Status.User.Username
}

func kidOfToken(t *testing.T, token string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Kid string }
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

// discoveryKids are the kids of kube-apiserver's /openid/v1/jwks, sorted.
func discoveryKids(t *testing.T, cfg *rest.Config) []string {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(cfg).RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	kids := make([]string, 0, len(set.Keys))
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	slices.Sort(kids)
	return kids
}

// waitDiscoveryMatches waits until kube-apiserver's /openid/v1/jwks holds exactly the
// keys of the JWKSConfig's published set (it refetches at the signer's refresh hint).
func waitDiscoveryMatches(t *testing.T, cfg *rest.Config, ns, name string) {
	t.Helper()
	var got, want []string
	deadline := time.Now().Add(2*cacheMaxAge + 20*time.Second)
	for {
		got, want = discoveryKids(t, cfg), slices.Sorted(slices.Values(publishedKids(t, ns, name)))
		if slices.Equal(got, want) {
			t.Logf("/openid/v1/jwks holds the published set: %v", got)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/openid/v1/jwks %v, published set %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRefusedAtStart: the binary stops at once, non-zero, with one line naming the
// problem, for a --socket that is not a socket and for a key kube-apiserver cannot use
// (an Ed25519 seed).
func TestRefusedAtStart(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	seed := shortDir(t)
	ed := newChain(t, testcerts.Ed25519)
	if err := os.WriteFile(filepath.Join(seed, jwtsigner.SeedCertificate), ed.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, jwtsigner.SeedKey), ed.KeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--socket=" + file}, "is not a socket"},
		{[]string{"--socket=" + filepath.Join(dir, "s.sock"), "--state-dir=" + seed}, "Ed25519"},
	} {
		args := append([]string{"jwt-signer", "--jwksconfig=kube-system/sa", "--kubeconfig=" + env.AdminKubeconfig(t)}, tc.args...)
		_, stderr, code := testenv.RunCommand(t, testenv.Binary(t), args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code == 0 || !strings.Contains(last, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and a line naming %q", tc.args, code, stderr, tc.want)
		}
		t.Logf("exit %d: %s", code, last)
	}
}
