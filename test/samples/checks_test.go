package samples

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/checksum/secretchecksum"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
)

var ctx = context.Background()

// roleAggregationAnnotation is what a Role carries to aggregate (docs/aggregation.md).
const roleAggregationAnnotation = "rbac.trustplane.io/aggregate-from"

// checkNamespaces: the namespaces file applied before the files that use it (kubectl
// would have failed otherwise), and every namespace is there.
func checkNamespaces(t *testing.T, r *run) {
	for _, ns := range typed[corev1.Namespace](t, r.samples, "Namespace") {
		got := &corev1.Namespace{}
		if err := cluster.Get(ctx, client.ObjectKey{Name: ns.Name}, got); err != nil || got.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s: %v, phase %q", ns.Name, err, got.Status.Phase)
		}
	}
}

// checkJWKS: each JWKSConfig is Ready and trustplane's own server serves its set, with the
// sample Secret's certificate as the current key.
func checkJWKS(t *testing.T, r *run) {
	configs := r.samples.ofKind("JWKSConfig")
	if r.standIn {
		// No node runs the nginx pods: the set is published, the JWKSConfig says why it
		// is not Ready, and trustplane's own server serves the set all the same.
		for _, sample := range configs {
			eventually(t, "JWKSConfig "+sample.GetName()+" NginxUnavailable", func() bool {
				obj, ok := live(t, sample)
				return ok && conditionReason(obj, "Ready") == "NginxUnavailable" && nestedString(obj.Object, "status", "lastKeyID") != ""
			})
		}
	} else {
		waitReady(t, r.samples, "JWKSConfig")
	}
	for _, sample := range configs {
		cfg, _ := live(t, sample)
		secretName := nestedString(cfg.Object, "spec", "certificateSecret")
		secret := sampleSecret(t, r.samples, cfg.GetNamespace(), secretName)
		checkKeyPair(t, secret)
		leaf := firstCertificate(t, secretData(secret, corev1.TLSCertKey))
		kid := nestedString(cfg.Object, "status", "lastKeyID")
		url := fmt.Sprintf("http://%s/%s/%s/jwks.json", r.jwksAddr, cfg.GetNamespace(), cfg.GetName())
		eventually(t, url+" serving the certificate of Secret "+secretName+" as its current key", func() bool {
			keys, ok := fetchJWKS(url)
			return ok && len(keys) > 0 && keys[0].KeyID == kid && len(keys[0].X5C) > 0 &&
				keys[0].X5C[0] == base64.StdEncoding.EncodeToString(leaf.Raw)
		})
	}
}

type jwk struct {
	KeyID string   `json:"kid"`
	X5C   []string `json:"x5c"`
}

func fetchJWKS(url string) ([]jwk, bool) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&set) != nil {
		return nil, false
	}
	return set.Keys, true
}

// checkClusterRoleAggregation: each sample aggregator holds exactly the rules of the
// sample ClusterRoles its selectors match.
func checkClusterRoleAggregation(t *testing.T, r *run) {
	roles := typed[rbacv1.ClusterRole](t, r.samples, "ClusterRole")
	aggregators := 0
	for _, aggregator := range roles {
		if aggregator.AggregationRule == nil {
			continue
		}
		aggregators++
		var want []rbacv1.PolicyRule
		for _, s := range aggregator.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				t.Fatalf("sample ClusterRole %s: %v", aggregator.Name, err)
			}
			for _, source := range roles {
				if source.Name != aggregator.Name && selector.Matches(labels.Set(source.Labels)) {
					want = append(want, source.Rules...)
				}
			}
		}
		waitForRules(t, "ClusterRole "+aggregator.Name, want, func() ([]rbacv1.PolicyRule, error) {
			got := &rbacv1.ClusterRole{}
			err := cluster.Get(ctx, client.ObjectKey{Name: aggregator.Name}, got)
			return got.Rules, err
		})
	}
	if aggregators == 0 {
		t.Fatal("config/samples has no ClusterRole with an aggregationRule")
	}
}

// checkRoleAggregation: each annotated sample Role holds exactly the rules of the sample
// Roles of its namespace that its annotation selects.
func checkRoleAggregation(t *testing.T, r *run) {
	roles := typed[rbacv1.Role](t, r.samples, "Role")
	aggregators := 0
	for _, aggregator := range roles {
		expr, ok := aggregator.Annotations[roleAggregationAnnotation]
		if !ok {
			continue
		}
		aggregators++
		selector, err := labels.Parse(expr)
		if err != nil {
			t.Fatalf("sample Role %s/%s: %v", aggregator.Namespace, aggregator.Name, err)
		}
		var want []rbacv1.PolicyRule
		for _, source := range roles {
			if source.Namespace == aggregator.Namespace && source.Name != aggregator.Name && selector.Matches(labels.Set(source.Labels)) {
				want = append(want, source.Rules...)
			}
		}
		waitForRules(t, "Role "+aggregator.Namespace+"/"+aggregator.Name, want, func() ([]rbacv1.PolicyRule, error) {
			got := &rbacv1.Role{}
			err := cluster.Get(ctx, client.ObjectKeyFromObject(aggregator), got)
			return got.Rules, err
		})
	}
	if aggregators == 0 {
		t.Fatalf("config/samples has no Role annotated %s", roleAggregationAnnotation)
	}
}

// waitForRules waits until rules() holds the same rules as want, in any order.
func waitForRules(t *testing.T, what string, want []rbacv1.PolicyRule, rules func() ([]rbacv1.PolicyRule, error)) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("sample %s aggregates no rules: its selectors match no sample", what)
	}
	var got []rbacv1.PolicyRule
	eventually(t, what+" to hold the rules of its sources", func() bool {
		var err error
		got, err = rules()
		return err == nil && sameRules(got, want)
	})
}

func sameRules(a, b []rbacv1.PolicyRule) bool {
	contains := func(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(x, r) })
	}
	for _, r := range a {
		if !contains(b, r) {
			return false
		}
	}
	for _, r := range b {
		if !contains(a, r) {
			return false
		}
	}
	return true
}

// checkSecretChecksum: every versioned sample TLS Secret counts (none is left out), and
// one SecretCheckSum over exactly them, whatever their namespace, is published in the
// manager's namespace: the cluster scope, as a Tengine-Ingress watching every namespace
// checks it.
func checkSecretChecksum(t *testing.T, r *run) {
	var want []string
	for _, s := range typed[corev1.Secret](t, r.samples, "Secret") {
		if _, versioned := s.Annotations[checksum.DefaultVersionAnnotation]; !versioned || s.Type != corev1.SecretTypeTLS {
			continue
		}
		checkKeyPair(t, s)
		id, err := checksum.SecretID(s.Name, s.Annotations, checksum.DefaultVersionAnnotation, allData(s))
		if err != nil {
			t.Fatalf("sample Secret %s/%s is left out of the checksum: %v", s.Namespace, s.Name, err)
		}
		want = append(want, id)
	}
	if len(want) == 0 {
		t.Fatalf("config/samples has no TLS Secret annotated %s", checksum.DefaultVersionAnnotation)
	}
	sort.Strings(want)
	sum := checksum.Sum(want)
	ns := secretchecksum.DefaultOptions().PublishNamespace
	eventually(t, fmt.Sprintf("a SecretCheckSum in %s over %v", ns, want), func() bool {
		list := &tenginev1.SecretCheckSumList{}
		if err := cluster.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(c tenginev1.SecretCheckSum) bool {
			got := slices.Sorted(slices.Values(c.Spec.IDs))
			return c.Spec.Checksum == sum && slices.Equal(got, want)
		})
	})
}

// checkPodCertificates: each sample Pod asks the manager's default signer on the node make
// run's agent serves; its PodCertificateRequest is issued, and the agent wrote a bundle
// whose key is the certificate's, issued for the Pod's ServiceAccount.
func checkPodCertificates(t *testing.T, r *run) {
	signer := podcertsigner.DefaultOptions().SignerName
	for _, pod := range typed[corev1.Pod](t, r.samples, "Pod") {
		if projected := projectedSigner(pod); projected != "" {
			// The kubelet's to serve (test/node reads what it wrote); the stand-in's agent
			// serves every pod.
			if projected != signer {
				t.Errorf("sample Pod %s/%s projects signer %q; the manager's signer serves %q", pod.Namespace, pod.Name, projected, signer)
			}
			eventually(t, "an issued PodCertificateRequest of Pod "+pod.Namespace+"/"+pod.Name, func() bool {
				return issuedFor(pod)
			})
			continue
		}
		if got := pod.Annotations[nodeagent.SignerAnnotation]; got != signer {
			t.Errorf("sample Pod %s/%s asks signer %q; the manager's signer serves %q", pod.Namespace, pod.Name, got, signer)
		}
		if pod.Spec.NodeName != localcp.SampleNodeName {
			t.Errorf("sample Pod %s/%s is on node %q; make run's node agent serves %q", pod.Namespace, pod.Name, pod.Spec.NodeName, localcp.SampleNodeName)
		}
		eventually(t, "an issued PodCertificateRequest of Pod "+pod.Namespace+"/"+pod.Name, func() bool {
			return issuedFor(pod)
		})
		var bundles []string
		eventually(t, "the credential bundle of Pod "+pod.Namespace+"/"+pod.Name, func() bool {
			bundles, _ = filepath.Glob(filepath.Join(r.podCerts, pod.Namespace, pod.Name, "*", nodeagent.BundleFile))
			return len(bundles) == 1
		})
		leaf := checkBundle(t, bundles[0])
		spiffeID := fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", podcertsigner.DefaultOptions().TrustDomain, pod.Namespace, pod.Spec.ServiceAccountName)
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != spiffeID {
			t.Errorf("bundle certificate URIs %v, want %s", leaf.URIs, spiffeID)
		}
		if want := allowedDNSNames(t, r, pod); !slices.Equal(leaf.DNSNames, want) {
			t.Errorf("bundle certificate DNS names %q, want %q (the sample PodIdentityPolicy's)", leaf.DNSNames, want)
		}
	}
}

// allowedDNSNames are the DNS names the sample PodIdentityPolicies allow pod's
// ServiceAccount, as the signer issues them (sorted).
func allowedDNSNames(t *testing.T, r *run, pod *corev1.Pod) []string {
	var names []string
	for _, p := range typed[podcertv1alpha1.PodIdentityPolicy](t, r.samples, "PodIdentityPolicy") {
		for _, sa := range p.Spec.ServiceAccounts {
			if p.Namespace == pod.Namespace && sa.Name == pod.Spec.ServiceAccountName {
				names = append(names, sa.DNSNames...)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// projectedSigner is the signer of pod's podCertificate projected volume, if it has one.
func projectedSigner(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.PodCertificate != nil {
				return src.PodCertificate.SignerName
			}
		}
	}
	return ""
}

// issuedFor says whether a PodCertificateRequest of pod was issued.
func issuedFor(pod *corev1.Pod) bool {
	list := &certificatesv1.PodCertificateRequestList{}
	if err := cluster.List(ctx, list, client.InNamespace(pod.Namespace)); err != nil {
		return false
	}
	return slices.ContainsFunc(list.Items, func(pcr certificatesv1.PodCertificateRequest) bool {
		return pcr.Spec.PodName == pod.Name && pcr.Status.CertificateChain != ""
	})
}

// checkBundle reads a credential bundle (private key, then the chain) and checks the key
// belongs to the leaf certificate.
func checkBundle(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keyBlock, rest := pem.Decode(raw)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		t.Fatalf("%s does not start with a PRIVATE KEY", path)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyBlock.Bytes})
	pair, err := tls.X509KeyPair(rest, certPEM)
	if err != nil {
		t.Fatalf("%s: the key is not the certificate's: %v", path, err)
	}
	return pair.Leaf
}

// checkKubeconfig: the brought-along Cluster and each KubeconfigRequest are Ready, and
// the issued kubeconfig authenticates and has exactly the rights asked for: each rule is
// allowed, and secrets (which the ceiling never grants) are not.
func checkKubeconfig(t *testing.T, r *run) {
	waitReady(t, r.samples, "Cluster")
	for _, obj := range waitReady(t, r.samples, "KubeconfigRequest") {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, kr); err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{}
		if err := cluster.Get(ctx, client.ObjectKey{Namespace: kr.Namespace, Name: kr.Status.SecretName}, secret); err != nil {
			t.Fatalf("the kubeconfig Secret of KubeconfigRequest %s: %v", kr.Name, err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["kubeconfig"])
		if err != nil {
			t.Fatalf("the kubeconfig of KubeconfigRequest %s: %v", kr.Name, err)
		}
		issued, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, attrs := range grantedAttributes(kr) {
			if !allowed(t, issued, attrs) {
				t.Errorf("the kubeconfig of KubeconfigRequest %s may not %+v", kr.Name, attrs)
			}
		}
		if secrets := (authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}); allowed(t, issued, secrets) {
			t.Errorf("the kubeconfig of KubeconfigRequest %s may list secrets", kr.Name)
		}
	}
}

// grantedAttributes lists every (namespace, group, resource, verb) a request's rules grant.
func grantedAttributes(kr *operatorv1alpha1.KubeconfigRequest) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	add := func(namespace string, rules []operatorv1alpha1.PolicyRule) {
		for _, rule := range rules {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					for _, verb := range rule.Verbs {
						out = append(out, authorizationv1.ResourceAttributes{Namespace: namespace, Group: group, Resource: resource, Verb: verb})
					}
				}
			}
		}
	}
	if kr.Spec.ClusterRole != nil {
		add("", kr.Spec.ClusterRole.Rules)
	}
	if kr.Spec.Role != nil {
		add(kr.Spec.Role.Namespace, kr.Spec.Role.Rules)
	}
	return out
}

// allowed asks the API server, as the issued credential, whether it may do attrs; the
// review itself only succeeds for a credential that authenticates.
func allowed(t *testing.T, issued kubernetes.Interface, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review, err := issued.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a SelfSubjectAccessReview with the issued kubeconfig: %v", err)
	}
	return review.Status.Allowed
}

// checkSubscription: each SubscriptionRequest is Ready with a credential of the sample
// pool that fits it: its provider, not dirty, EU access as asked, shared for "shared",
// and for a global account one now labelled as that tenant's.
func checkSubscription(t *testing.T, r *run) {
	for _, obj := range waitReady(t, r.samples, "SubscriptionRequest") {
		sr := &cp.SubscriptionRequest{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, sr); err != nil {
			t.Fatal(err)
		}
		name := sr.Status.GardenerSecretName
		sample := sampleSecret(t, r.samples, sr.Namespace, name)
		l := sample.Labels
		if l[cp.LabelHyperscalerType] != sr.Spec.Provider || l[cp.LabelDirty] == "true" || (l[cp.LabelEUAccess] == "true") != sr.Spec.EUAccess {
			t.Errorf("SubscriptionRequest %s (%+v) got credential %s labelled %v", sr.Name, sr.Spec, name, l)
		}
		tenant, err := credentialpool.ParseSelector(sr.Spec.SubscriptionSelector)
		if err != nil {
			t.Fatal(err)
		}
		if tenant == "" {
			if l[cp.LabelShared] != "true" {
				t.Errorf("shared SubscriptionRequest %s got credential %s, which is not shared", sr.Name, name)
			}
			continue
		}
		claimed := &corev1.Secret{}
		if err := cluster.Get(ctx, client.ObjectKey{Namespace: sr.Namespace, Name: name}, claimed); err != nil {
			t.Fatal(err)
		}
		if claimed.Labels[cp.LabelTenantName] != tenant || l[cp.LabelShared] == "true" {
			t.Errorf("SubscriptionRequest %s for tenant %s got credential %s labelled %v", sr.Name, tenant, name, claimed.Labels)
		}
	}
}

// sampleSecret finds a Secret of config/samples.
func sampleSecret(t *testing.T, s *sampleSet, namespace, name string) *corev1.Secret {
	t.Helper()
	for _, secret := range typed[corev1.Secret](t, s, "Secret") {
		if secret.Namespace == namespace && secret.Name == name {
			return secret
		}
	}
	t.Fatalf("config/samples has no Secret %s/%s", namespace, name)
	return nil
}

// secretData reads a key of a sample Secret, written as data or as stringData.
// allData is a sample Secret's data and stringData together, as the API server stores them.
func allData(s *corev1.Secret) map[string][]byte {
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data
}

func secretData(s *corev1.Secret, key string) []byte {
	if v, ok := s.Data[key]; ok {
		return v
	}
	return []byte(s.StringData[key])
}

// checkKeyPair: a sample TLS Secret holds a certificate and the key that matches it.
func checkKeyPair(t *testing.T, s *corev1.Secret) {
	t.Helper()
	if _, err := tls.X509KeyPair(secretData(s, corev1.TLSCertKey), secretData(s, corev1.TLSPrivateKeyKey)); err != nil {
		t.Errorf("sample Secret %s/%s: %v", s.Namespace, s.Name, err)
	}
}

func firstCertificate(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func nestedString(obj map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj, fields...)
	return s
}
