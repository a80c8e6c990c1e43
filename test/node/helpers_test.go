package node

import (
	"context"
	"crypto"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	apiextensionsCRD = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	netDialer        = net.Dialer{Timeout: 3 * time.Second}
)

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, timeout, cond)
}

// waitForPods is waitFor, telling on a timeout what the pods of ns matching labels say:
// their containers' states and logs.
func waitForPods(t *testing.T, what string, timeout time.Duration, ns string, labels map[string]string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			pods := &corev1.PodList{}
			_ = c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(labels))
			for _, p := range pods.Items {
				t.Logf("pod %s: phase %s, conditions %+v", p.Name, p.Status.Phase, p.Status.Conditions)
				for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
					t.Logf("  container %s: ready %v, restarts %d, state %+v, last %+v\n%s", st.Name, st.Ready, st.RestartCount, st.State, st.LastTerminationState, containerLogs(t, ns, p.Name, st.Name))
				}
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %s/%s: %v", ns, name, err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// namespace creates a namespace named after prefix and the test.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	create(t, ns)
	// Pods need the namespace's default ServiceAccount, which the controller makes.
	waitFor(t, "namespace "+ns.Name+"'s default ServiceAccount", 30*time.Second, func() bool {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil
	})
	return ns.Name
}

func waitRunning(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, "pod "+ns+"/"+name+" to run", 2*time.Minute, func() bool {
		pod := &corev1.Pod{}
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod) == nil && pod.Status.Phase == corev1.PodRunning
	})
}

func clusterIP(t *testing.T, ns, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	get(t, ns, name, svc)
	return svc.Spec.ClusterIP
}

// podLogs reads a pod's log through the API server, which asks the kubelet with its
// kubelet client certificate.
func podLogs(t *testing.T, ns, name string) string {
	t.Helper()
	return containerLogs(t, ns, name, "")
}

func containerLogs(t *testing.T, ns, name, container string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(raw)
}

// signingKey is a TLS Secret's key as a token issuer signs with it.
type signingKey struct {
	key      crypto.Signer
	kid, alg string
	secret   string
	data     map[string][]byte
}

// newSigningKey makes a P-256 chain and stores it as TLS Secret ns/name.
func newSigningKey(t *testing.T, ns, name string) signingKey {
	t.Helper()
	data := newTLSData(t, "issuer.node.test")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data})
	return keyOf(t, name, data)
}

func newTLSData(t *testing.T, cn string) map[string][]byte {
	t.Helper()
	leafKey, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(leafKey, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
}

func keyOf(t *testing.T, secret string, data map[string][]byte) signingKey {
	t.Helper()
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	published, err := jwkset.ParseChain(data[corev1.TLSCertKey], "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{key: pair.PrivateKey.(crypto.Signer), kid: published.KeyID(), alg: published.JWK.Algorithm, secret: secret, data: data}
}

// signToken is a token of issuer for audience, signed with key.
func signToken(t *testing.T, issuer, audience string, key signingKey) string {
	t.Helper()
	token, err := testcerts.SignJWT(key.key, key.kid, key.alg, issuer, audience, "node-test")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// createJWKSConfig publishes secret's key, with nginx pods when withNginx.
func createJWKSConfig(t *testing.T, ns, name, secret, issuer string, withNginx bool) {
	t.Helper()
	create(t, &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: jwksv1alpha1.JWKSConfigSpec{
			CertificateSecret: secret, Issuer: issuer, KeepOldKeys: ptr.To(true),
			Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(withNginx), Replicas: ptr.To[int32](1)},
		},
	})
}

// waitReady waits for the JWKSConfig's Ready condition (with nginx: every replica
// available). On a timeout it tells what the JWKSConfig's conditions and the namespace's
// pods said.
func waitReady(t *testing.T, ns, name string) {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{}
	ready := false
	defer func() { // also after waitForPods' t.Fatalf
		if !ready {
			t.Logf("JWKSConfig %s/%s: conditions %+v", ns, name, cfg.Status.Conditions)
		}
	}()
	waitForPods(t, "JWKSConfig "+ns+"/"+name+" to be Ready", 3*time.Minute, ns, nil, func() bool {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(cfg.Status.Conditions, "Ready")
	})
	ready = true
}

// issueKubeconfig brings this cluster along as Cluster "self" (its admin kubeconfig in a
// Secret, as make run's sample does) and has a KubeconfigRequest in ns ask for reading
// JWKSConfigs in ns; it returns the Secret holding the issued kubeconfig.
func issueKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	if err := localcp.WriteSampleClusterKubeconfig(context.Background(), cp.Config); err != nil {
		t.Fatal(err)
	}
	create(t, &operatorv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: localcp.SampleClusterNamespace, Name: "self"},
		Spec: operatorv1alpha1.ClusterSpec{
			KubeconfigSecretRef:         &operatorv1alpha1.SecretKeyReference{Name: localcp.SampleClusterSecret},
			KubeconfigRequestNamespaces: []string{ns},
		},
	})
	request := &operatorv1alpha1.KubeconfigRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{
			Cluster: "self", ClusterNamespace: localcp.SampleClusterNamespace, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: ns, Rules: []operatorv1alpha1.PolicyRule{{
				APIGroups: []string{jwksv1alpha1.GroupVersion.Group}, Resources: []string{"jwksconfigs"}, Verbs: []string{"get", "list"},
			}}},
		},
	}
	create(t, request)
	waitFor(t, "the KubeconfigRequest to issue a kubeconfig", 3*time.Minute, func() bool {
		get(t, ns, "reader", request)
		return meta.IsStatusConditionTrue(request.Status.Conditions, "Ready") && request.Status.SecretName != ""
	})
	return request.Status.SecretName
}

// hasAll says whether s contains every one of subs.
func hasAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
