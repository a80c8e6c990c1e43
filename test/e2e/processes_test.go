package e2e

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

const (
	managerNamespace   = "trustplane-system"
	nodeAgentNamespace = "trustplane-node-agent"
	gatewayNamespace   = "edge"
	jwksNamespace      = "e2e-jwks"
	podsNamespace      = "e2e-pods"
	nodeName           = "e2e-node"
	podSigner          = "trustplane.io/pod-identity" // the manager's default signer
)

// TestProcessesAsDeployed installs the manifests, stores a JWKSConfig the way an earlier
// release's CRD let it be stored, and runs the manager, the node agent and the data-plane
// agent; each must do its job under its own ServiceAccount.
func TestProcessesAsDeployed(t *testing.T) {
	manager := rendered(t, "config/default")
	nodeAgent := rendered(t, "config/node-agent")
	gateway := rendered(t, "test/e2e/testdata/gateway")
	jwksServer := named(rendered(t, "config/jwks-server"), "trustplane-jwks-server")
	for _, objs := range [][]*unstructured.Unstructured{manager, nodeAgent, gateway, jwksServer} {
		install(t, objs)
	}
	for _, ns := range []string{jwksNamespace, podsNamespace} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	storeWithOldSchema(t)
	gardenKubeconfig := gardenInThisServer(t)
	// No kube-controller-manager or kubelet: a stand-in rolls the nginx Deployments out.
	env.RollOutDeployments(t, jwksv1alpha1.OwnerLabel)

	bin := testenv.Binary(t)
	managerProbes, managerMetrics, managerJWKSServer := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	mgr := testenv.StartProcess(t, bin, argsOf(t, container(t, podSpecOf(t, manager, "Deployment", "trustplane-manager"), "manager"), nil,
		"--kubeconfig="+env.ServiceAccountKubeconfig(t, managerNamespace, "trustplane-manager"),
		// A pod reads these from its token mount and ports; a process on a laptop is told.
		"--leader-election-namespace="+managerNamespace, "--podcertificate-signer-ca-namespace="+managerNamespace,
		"--secret-checksum-publish-namespace="+managerNamespace, "--jwks-issuer-claim-namespace="+managerNamespace,
		// The gateway's sidecar follows its own namespace only, so it matches only a
		// per-namespace checksum; the default "cluster" scope alone publishes one over all
		// namespaces (docs/checksum.md, "Data plane").
		"--secret-checksum-scopes=cluster,namespace",
		// A garden (this API server's Shoots in gardenNamespace): the leader publishes the
		// landscape for admission, where a pod's namespace would put it. The pool stays the
		// Secret pool, as testPoolHeld and the waiting request expect.
		"--garden-kubeconfig="+gardenKubeconfig, "--garden-namespace="+gardenNamespace,
		"--cluster-landscape-namespace="+managerNamespace, "--subscription-pool=secrets",
		"--metrics-bind-address="+managerMetrics, "--health-probe-bind-address="+managerProbes, "--jwks-server-bind-address="+managerJWKSServer,
		// A CA rotation canaried for seconds, so that testCanariedRotation sees it judged.
		"--podcertificate-signer-canary-observation=3s",
	)...)
	mgr.WaitHTTP200(t, urlOf(managerProbes, "/readyz"), 60*time.Second)

	t.Run("group", func(t *testing.T) {
		t.Run("manager publishes a JWK Set", func(t *testing.T) {
			t.Parallel()
			testManagerPublishes(t, managerJWKSServer)
		})
		t.Run("jwks-server serves what the manager publishes", func(t *testing.T) {
			t.Parallel()
			testJWKSServer(t, bin, podSpecOf(t, jwksServer, "Deployment", "trustplane-jwks-server"))
		})
		t.Run("a JWKSConfig stored under an older schema stops nothing", func(t *testing.T) {
			t.Parallel()
			testOldObjectReported(t, mgr)
		})
		t.Run("node agent writes a credential bundle", func(t *testing.T) {
			t.Parallel()
			testNodeAgent(t, bin, podSpecOf(t, nodeAgent, "DaemonSet", "trustplane-node-agent"))
		})
		t.Run("data-plane agent writes a verified pair", func(t *testing.T) {
			t.Parallel()
			testDataplane(t, bin, podSpecOf(t, gateway, "Deployment", "gateway"))
		})
		t.Run("node agent as make run runs it serves metrics", func(t *testing.T) {
			t.Parallel()
			testMakeRunNodeAgentMetrics(t, bin)
		})
		t.Run("the landscape published for admission", func(t *testing.T) {
			t.Parallel()
			testLandscapeAdmission(t)
		})
		t.Run("Cluster, KubeconfigRequest and SubscriptionRequest reported", func(t *testing.T) {
			t.Parallel()
			testOperatorsReport(t)
		})
	})
	// After the node agent's pod has its certificate: that pod is the canary.
	t.Run("a canaried CA rotation under the manager's token", testCanariedRotation)
	// Alone: a hold holds every request of the pool, testOperatorsReport's too.
	t.Run("the pool held, lifted and counted", func(t *testing.T) { testPoolHeld(t, managerMetrics) })
	// After the others: by then the manager has published checksums, and every object
	// whose series the alerts and the dashboard read exists.
	t.Run("manager exports only the metrics it sets", func(t *testing.T) {
		checkOwnMetrics(t, "manager", scrapeSecure(t, managerMetrics), "trustplane_jwks_published_keys", "trustplane_build_info",
			"trustplane_object_ready", "trustplane_cluster_provisioned", "trustplane_kubeconfig_rotation_due_timestamp_seconds",
			"trustplane_subscription_pool_exhausted", "trustplane_podcertificate_signer_ca_not_after_seconds", "trustplane_checksum_left_out",
			"trustplane_pool_on_hold", "trustplane_pool_dirty_credentials")
	})
	t.Run("every metric the alerts and the dashboard query is exported", testQueriedMetricsAreExported)
}

func testManagerPublishes(t *testing.T, jwksServer string) {
	chain := newChain(t, "issuer.example.com")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: "issuer-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
	create(t, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls"}})
	key, err := jwkset.ParseChain(chain.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kid := key.JWK.KeyID

	testenv.Eventually(t, "the JWK Set in its ConfigMap", 30*time.Second, func() bool {
		cm := &corev1.ConfigMap{}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: "issuer-jwks"}, cm) == nil &&
			strings.Contains(cm.Data[jwkset.DocumentKey], `"kid":"`+kid+`"`)
	})
	testenv.Eventually(t, "the JWK Set from the manager's own server", 30*time.Second, func() bool {
		body, ok := get(t, urlOf(jwksServer, "/"+jwksNamespace+"/issuer/jwks.json"))
		var set struct{ Keys []struct{ Kid string } }
		return ok && json.Unmarshal(body, &set) == nil && len(set.Keys) == 1 && set.Keys[0].Kid == kid
	})
	testenv.Eventually(t, "the JWKSConfig Ready", 30*time.Second, func() bool {
		cfg := &jwksv1alpha1.JWKSConfig{}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: "issuer"}, cfg) == nil &&
			meta.IsStatusConditionTrue(cfg.Status.Conditions, "Ready") && cfg.Status.LastKeyID == kid
	})
	writeStatusFromStaleRead(t, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: "issuer"}})
}

// named are the objects of a render with the name: what an overlay adds to config/default.
func named(objs []*unstructured.Unstructured, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetName() == name {
			out = append(out, obj)
		}
	}
	return out
}

// testJWKSServer runs `trustplane jwks-server` with the args of config/jwks-server's
// Deployment, under the ServiceAccount and ClusterRole that install grants it (it reads
// and writes nothing else), and reads a set the manager publishes from it: on the
// canonical route and on the issuer's own host and path.
func testJWKSServer(t *testing.T, bin string, pod corev1.PodSpec) {
	server, probes := testenv.FreeAddr(t), testenv.FreeAddr(t)
	p := testenv.StartProcess(t, bin, argsOf(t, container(t, pod, "jwks-server"), nil,
		"--kubeconfig="+env.ServiceAccountKubeconfig(t, managerNamespace, "trustplane-jwks-server"),
		// A pod reads its namespace from its token mount; a process on a laptop is told.
		"--jwks-issuer-claim-namespace="+managerNamespace,
		"--metrics-bind-address="+testenv.FreeAddr(t), "--health-probe-bind-address="+probes, "--jwks-server-bind-address="+server)...)
	p.WaitHTTP200(t, urlOf(probes, "/readyz"), 60*time.Second)

	chain := newChain(t, "separate.example.com")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: "separate-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
	create(t, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: "separate"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "separate-tls", Issuer: "https://separate.e2e.example/keys"}})
	key, err := jwkset.ParseChain(chain.PEM(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []struct{ host, path string }{{"any.example", "/" + jwksNamespace + "/separate/jwks.json"}, {"separate.e2e.example", "/keys/jwks.json"}} {
		testenv.Eventually(t, "the JWK Set from trustplane jwks-server at "+route.host+route.path, 30*time.Second, func() bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urlOf(server, route.path), nil)
			req.Host = route.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var set struct{ Keys []struct{ Kid string } }
			return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&set) == nil && len(set.Keys) == 1 && set.Keys[0].Kid == key.KeyID()
		})
	}
	if strings.Contains(p.Output(), "forbidden") {
		t.Errorf("jwks-server was refused a read under its own ServiceAccount:\n%s", p.Output())
	}
}

// storeWithOldSchema stores the JWKSConfig "legacy" with values today's CRD refuses ("30d",
// a quantity Go cannot parse, an issuer in a second spelling) the only way they can get in: under an older CRD without the
// rules, as an upgrade finds them. The CRD is restored before the manager starts.
func storeWithOldSchema(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	key := client.ObjectKey{Name: "jwksconfigs.jwks.trustplane.io"}
	if err := env.Client.Get(ctx, key, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.Spec.DeepCopy()
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	ttl := spec.Properties["oldKeysTTL"]
	ttl.XValidations = nil
	spec.Properties["oldKeysTTL"] = ttl
	issuer := spec.Properties["issuer"]
	issuer.XValidations = issuer.XValidations[:1] // the release before had no spelling rule
	spec.Properties["issuer"] = issuer
	nginx := spec.Properties["nginx"]
	resources := nginx.Properties["resources"]
	limits := resources.Properties["limits"]
	limits.AdditionalProperties.Schema.XValidations = nil
	resources.Properties["limits"] = limits
	nginx.Properties["resources"] = resources
	spec.Properties["nginx"] = nginx
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}

	legacy := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"certificateSecret": "issuer-tls", "oldKeysTTL": "30d", "issuer": "https://held.example/%68",
			"nginx": map[string]any{"enabled": false, "resources": map[string]any{"limits": map[string]any{"cpu": "1e1.5"}}},
		}}}
		u.SetGroupVersionKind(jwksv1alpha1.GroupVersion.WithKind("JWKSConfig"))
		u.SetNamespace(jwksNamespace)
		u.SetName("legacy")
		return u
	}
	testenv.Eventually(t, "the relaxed CRD in effect", 30*time.Second, func() bool {
		return env.Client.Create(ctx, legacy(), client.DryRunAll) == nil
	})
	create(t, legacy())

	if err := env.Client.Get(ctx, key, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec = *original
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "today's CRD back in effect", 30*time.Second, func() bool {
		u := legacy()
		u.SetName("legacy-again")
		return env.Client.Create(ctx, u, client.DryRunAll) != nil
	})
}

// testOldObjectReported: the stored object decodes, is reported, and nothing else stops
// (the other subtests run against the same manager and informers).
func testOldObjectReported(t *testing.T, mgr *testenv.Process) {
	testenv.Eventually(t, "the legacy JWKSConfig reported InvalidSpec", 30*time.Second, func() bool {
		cfg := &jwksv1alpha1.JWKSConfig{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: "legacy"}, cfg) != nil {
			return false
		}
		ready := meta.FindStatusCondition(cfg.Status.Conditions, "Ready")
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == "InvalidSpec" &&
			strings.Contains(ready.Message, `spec.oldKeysTTL: "30d"`) && strings.Contains(ready.Message, `spec.nginx.resources.limits[cpu]: "1e1.5"`) &&
			strings.Contains(ready.Message, `spec.issuer: issuer "https://held.example/%68": path "/%68" holds a percent-escape`)
	})
	// A user's mistake is logged at info, once, without a stack trace: not as an error.
	testenv.Eventually(t, "the stall logged at info", 30*time.Second, func() bool {
		return strings.Contains(mgr.Output(), "stalled: only a change can help")
	})
	for _, line := range strings.Split(mgr.Output(), "\n") {
		if strings.Contains(line, "legacy") && (strings.Contains(line, `"level":"error"`) || strings.Contains(line, "stacktrace")) {
			t.Errorf("the stalled JWKSConfig was logged as an error: %s", line)
		}
	}

}

// testCanariedRotation: the manager, with its own ServiceAccount's rights, takes a next CA
// an operator supplies into the preview bundle only, says that no canary is selected
// (listing namespaces and nodes), observes the namespace labelled a canary, judges it
// (listing events and requests) and puts the CA live; a rollback drops it.
func testCanariedRotation(t *testing.T) {
	key := client.ObjectKey{Namespace: managerNamespace, Name: "trustplane-pod-identity-ca"}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, key, secret); err != nil {
		t.Fatalf("the signer's CA: %v", err)
	}
	next, err := podcert.NewCA("e2e next", time.Now(), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data[podcert.NextCertKey], secret.Data[podcert.NextKeyKey] = next.CertPEM, next.KeyPEM
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	bundleHolds := func(name string) bool {
		ctb := &certificatesv1.ClusterTrustBundle{}
		return env.Client.Get(ctx, client.ObjectKey{Name: name}, ctb) == nil && strings.Contains(ctb.Spec.TrustBundle, string(next.CertPEM))
	}
	status := func(reason string) func() bool {
		return func() bool {
			s := &corev1.Secret{}
			return env.Client.Get(ctx, key, s) == nil && strings.HasPrefix(s.Annotations[certificates.AnnotationCARotationStatus], reason)
		}
	}
	live, preview := podcertsigner.BundleName(podSigner), podcertsigner.PreviewBundleName(podSigner)
	testenv.Eventually(t, "the next CA in the preview bundle only, no canary selected", 30*time.Second, func() bool {
		return bundleHolds(preview) && !bundleHolds(live) && status(certificates.ReasonCanaryTargetsNothing)()
	})
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: podsNamespace}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[certificates.LabelCanary] = "true"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the canary judged and the next CA live", 30*time.Second, func() bool {
		return status(certificates.ReasonCALive)() && bundleHolds(live)
	})
	if err := env.Client.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	secret.Annotations[certificates.AnnotationCARollback] = "e2e"
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the rolled back CA gone from both bundles", 30*time.Second, func() bool {
		return !bundleHolds(live) && !bundleHolds(preview)
	})
}

func testNodeAgent(t *testing.T, bin string, daemonSet corev1.PodSpec) {
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: podsNamespace, Name: "web"}})
	// The manager reads the namespace's PodIdentityPolicies with its own ServiceAccount's
	// rights, through the admission policy config/default installs.
	serviceName := "web." + podsNamespace + ".svc"
	create(t, &podcertv1alpha1.PodIdentityPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: podsNamespace, Name: "web"},
		Spec: podcertv1alpha1.PodIdentityPolicySpec{ServiceAccounts: []podcertv1alpha1.ServiceAccountIdentity{{Name: "web", DNSNames: []string{serviceName}}}}})
	create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: podsNamespace, Name: "web", Annotations: map[string]string{
			nodeagent.SignerAnnotation: podSigner, nodeagent.KeyTypeAnnotation: "ECDSAP256"}},
		Spec: corev1.PodSpec{NodeName: nodeName, ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	})
	dir, probes, metricsAddr := t.TempDir(), testenv.FreeAddr(t), testenv.FreeAddr(t)
	agent := testenv.StartProcess(t, bin, argsOf(t, container(t, daemonSet, "node-agent"), map[string]string{"spec.nodeName": nodeName},
		// A pod's token, which names its node: the agent's admission policy requires it.
		"--kubeconfig="+env.PodServiceAccountKubeconfig(t, nodeAgentNamespace, "trustplane-node-agent", nodeName),
		"--dir="+dir, "--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probes,
	)...)
	agent.WaitHTTP200(t, urlOf(probes, "/readyz"), 60*time.Second)

	var bundle string
	testenv.Eventually(t, "a credential bundle for the opted-in pod", 60*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(dir, podsNamespace, "web", "*", nodeagent.BundleFile))
		if len(found) == 1 {
			bundle = found[0]
		}
		return bundle != ""
	})
	caSecret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "trustplane-pod-identity-ca"}, caSecret); err != nil {
		t.Fatalf("the signer's CA: %v", err)
	}
	if leaf := verifyBundle(t, bundle, caSecret.Data[corev1.TLSCertKey]); leaf != nil && !slices.Equal(leaf.DNSNames, []string{serviceName}) {
		t.Errorf("the leaf's DNS names %q, want the policy's %s", leaf.DNSNames, serviceName)
	}

	// Relying parties get the CA from the ClusterTrustBundle the manager publishes under
	// its own ServiceAccount (the attest permission included), listed by signer name as
	// kubelet lists it for a clusterTrustBundle projection.
	var trust []byte
	testenv.Eventually(t, "a ClusterTrustBundle for "+podSigner, 30*time.Second, func() bool {
		list := &certificatesv1.ClusterTrustBundleList{}
		if err := env.Client.List(ctx, list, client.MatchingFields{"spec.signerName": podSigner}); err != nil {
			return false
		}
		for _, ctb := range list.Items {
			trust = append(trust, ctb.Spec.TrustBundle...)
		}
		return len(list.Items) > 0
	})
	verifyBundle(t, bundle, trust)
	checkAgentMetrics(t, "node-agent", metricsAddr, "trustplane_podcertificate_states")
}

// verifyBundle checks the bundle is a private key and its certificate, issued by the CA.
// verifyBundle checks the credential bundle at path against the CA and returns its leaf
// (nil when it does not verify).
func verifyBundle(t *testing.T, path string, caPEM []byte) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the CA Secret holds no certificate")
	}
	leaf, err := testcerts.CheckBundle(raw, roots)
	if err != nil {
		t.Error(err)
	}
	return leaf
}

func testDataplane(t *testing.T, bin string, gatewayPod corev1.PodSpec) {
	chain := newChain(t, "edge.example.com")
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: "edge-tls-1", Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()},
	})
	dir, probes, metricsAddr := t.TempDir(), testenv.FreeAddr(t), testenv.FreeAddr(t)
	agent := testenv.StartProcess(t, bin, argsOf(t, container(t, gatewayPod, "trustplane-dataplane"), map[string]string{"metadata.namespace": gatewayNamespace},
		"--kubeconfig="+env.ServiceAccountKubeconfig(t, gatewayNamespace, gatewayPod.ServiceAccountName),
		"--dir="+dir, "--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probes,
		// Fail-open would write the pair before any checksum reached the namespace: closed,
		// it proves the manager's per-namespace checksum is there and matches.
		"--fail-open=false",
	)...)
	agent.WaitHTTP200(t, urlOf(probes, "/readyz"), 60*time.Second)
	checkAgentMetrics(t, "dataplane", metricsAddr, "trustplane_dataplane_consistent")

	// The pair is written only once the manager's checksum covers it and the agent agrees.
	testenv.Eventually(t, "the verified pair on disk", 60*time.Second, func() bool {
		crt, err1 := os.ReadFile(filepath.Join(dir, "edge-tls-1.crt"))
		key, err2 := os.ReadFile(filepath.Join(dir, "edge-tls-1.key"))
		return err1 == nil && err2 == nil && string(crt) == string(chain.PEM()) && string(key) == string(chain.KeyPEM())
	})
	testDataplaneIngressClasses(t, agent, metricsAddr)
}

func newChain(t *testing.T, cn string) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	c, err := testcerts.NewChain(key, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// get fetches url; ok is false unless it answered 200.
func get(t *testing.T, url string) ([]byte, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, err == nil && resp.StatusCode == http.StatusOK
}
