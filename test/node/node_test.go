package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/internal/version"
)

// The chart's release: its objects are named trustplane-<component>.
const (
	release          = "trustplane"
	releaseNamespace = "trustplane-system"
	agentNamespace   = "trustplane-node-agent"
	podIdentity      = "trustplane.io/pod-identity"
)

// TestNode installs the chart and then proves each system through pods, in order: they
// share the one installed trustplane; the chart's lifecycle (failover, upgrade,
// uninstall) comes last.
func TestNode(t *testing.T) {
	needNode(t)
	if !t.Run("install", testInstall) {
		t.FailNow()
	}
	// Pod certificates over time take minutes (lifecycle_test.go): their pods start first,
	// and the waits come after the rest.
	var lifecycle *podCertLifecycle
	t.Run("podcert-lifecycle", func(t *testing.T) { lifecycle = startPodCertLifecycle(t) })
	t.Run("jwks", testJWKS)
	t.Run("podcert", testPodCertificate)
	t.Run("checksum", testChecksumSidecar)
	t.Run("kubeconfig", testKubeconfigInAPod)
	t.Run("failover", testFailover)
	t.Run("upgrade", testUpgrade)
	if lifecycle != nil {
		t.Run("podcert-refresh", lifecycle.testRefresh)
	}
	t.Run("uninstall", testUninstall)
	if lifecycle != nil {
		t.Run("podcert-signer-stopped", lifecycle.testStopped)
	}
}

// helm runs the helm the project builds against the test cluster.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	args = append(args, "--kubeconfig", kubeconfig)
	stdout, stderr, code := testenv.RunCommand(t, testenv.Tool(t, "helm"), args...)
	if code != 0 {
		t.Fatalf("helm %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// chartValues are the values every install and upgrade passes: the node agent on, and a
// gateway namespace for the data-plane sidecar.
var chartValues = []string{
	"--set", "nodeAgent.enabled=true",
	"--set", "dataplane.namespaces={" + gatewayNamespace + "}",
	// The gateway's own ServiceAccount, which its sidecar shares.
	"--set", "dataplane.serviceAccountName=gateway",
	// Pod certificates refreshed at the earliest the API allows (lifecycle_test.go).
	"--set-json", "config.podcertificateSigner.refreshFraction=" + signerEarliestRefresh["refreshFraction"],
	"--set", "config.podcertificateSigner.backdate=" + signerEarliestRefresh["backdate"],
}

// testInstall: `helm install` comes up Ready as pods — the manager's two replicas and the
// node agent — with the images make images built, under the chart's RBAC and security
// context, their probes passing.
func testInstall(t *testing.T) {
	// The chart puts the sidecar's ServiceAccount and Role into the gateway's namespace.
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatewayNamespace}})
	chart := filepath.Join(testenv.RepoRoot(), "charts", "trustplane")
	helm(t, append([]string{"install", release, chart, "-n", releaseNamespace, "--create-namespace", "--wait", "--timeout", "5m"}, chartValues...)...)
	manager := &appsv1.Deployment{}
	get(t, releaseNamespace, release+"-manager", manager)
	if manager.Status.ReadyReplicas != 2 {
		t.Fatalf("manager Deployment: %d of 2 replicas ready", manager.Status.ReadyReplicas)
	}
	if image := manager.Spec.Template.Spec.Containers[0].Image; image != version.Image("trustplane") {
		t.Errorf("manager image %s, want %s (what make images builds)", image, version.Image("trustplane"))
	}
	agent := &appsv1.DaemonSet{}
	get(t, agentNamespace, release+"-node-agent", agent)
	if agent.Status.NumberReady != 1 {
		t.Fatalf("node-agent DaemonSet: %d of 1 pods ready", agent.Status.NumberReady)
	}
	waitFor(t, "a manager replica to lead", time.Minute, func() bool { return leader(t) != "" })
}

// testFailover: deleting the leader's pod moves the lease to the other replica, and the
// JWKS server keeps answering through the Service from the surviving pod meanwhile.
func testFailover(t *testing.T) {
	ns := namespace(t, "failover")
	key := newSigningKey(t, ns, "issuer-tls")
	createJWKSConfig(t, ns, "served", key.secret, "", false)
	url := "http://" + clusterIP(t, releaseNamespace, release+"-jwks") + "/" + ns + "/served/jwks.json"
	waitFor(t, "trustplane's server to serve the set", time.Minute, func() bool { return strings.Contains(httpGet(url), key.kid) })

	old := leader(t)
	if err := c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: old}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	misses := 0
	for {
		if !strings.Contains(httpGet(url), key.kid) {
			misses++
		}
		if now := leader(t); now != "" && now != old {
			t.Logf("the lease moved from %s to %s", old, now)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease did not move from %s within 2 minutes", old)
		}
		time.Sleep(time.Second)
	}
	// kube-proxy drops a terminating endpoint within a sync: at most a request or two.
	if misses > 2 {
		t.Errorf("the JWKS Service failed %d requests while the leader's pod went", misses)
	}
}

// testUpgrade: `helm upgrade` with a changed config rolls the manager's pods.
func testUpgrade(t *testing.T) {
	before := podNames(t, releaseNamespace, "app.kubernetes.io/component=manager")
	chart := filepath.Join(testenv.RepoRoot(), "charts", "trustplane")
	helm(t, append([]string{"upgrade", release, chart, "-n", releaseNamespace, "--wait", "--timeout", "5m",
		"--set", "config.jwks.workers=8"}, chartValues...)...)
	waitFor(t, "the manager's pods to be replaced", 3*time.Minute, func() bool {
		now := podNames(t, releaseNamespace, "app.kubernetes.io/component=manager")
		if len(now) != 2 {
			return false
		}
		for name := range now {
			if before[name] {
				return false
			}
		}
		return true
	})
}

// testUninstall: `helm uninstall` removes the release's workloads and RBAC; the CRDs (and
// so every object of trustplane's kinds) stay, as docs/operations.md says.
func testUninstall(t *testing.T) {
	helm(t, "uninstall", release, "-n", releaseNamespace, "--wait", "--timeout", "3m")
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: release + "-manager"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: release + "-node-agent"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: release + "-jwks"}},
	} {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err == nil {
			t.Errorf("%T %s/%s is still there after helm uninstall", obj, obj.GetNamespace(), obj.GetName())
		}
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsCRD)
	if err := c.Get(context.Background(), client.ObjectKey{Name: "jwksconfigs.jwks.trustplane.io"}, crd); err != nil {
		t.Errorf("the JWKSConfig CRD went with the release: %v", err)
	}
	waitFor(t, "the manager's pods to go", 2*time.Minute, func() bool {
		return len(podNames(t, releaseNamespace, "app.kubernetes.io/component=manager")) == 0
	})
}

// testPodCertificate: a pod's podCertificate projected volume is filled by the kubelet's
// own PodCertificate manager from trustplane's signer; the bundle's key matches its
// certificate, which chains to the signer's ClusterTrustBundle and names the pod's
// ServiceAccount as a SPIFFE ID.
func testPodCertificate(t *testing.T) {
	ns := namespace(t, "podcert")
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "app", Image: version.Image("pause"),
				VolumeMounts: []corev1.VolumeMount{{Name: "identity", MountPath: "/var/run/identity", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: podIdentity, KeyType: "ECDSAP256", CredentialBundlePath: "bundle.pem",
				}}},
			}}}},
		},
	}
	create(t, pod)
	waitRunning(t, ns, "web")
	get(t, ns, "web", pod)
	bundlePath := filepath.Join(nodeDir, "kubelet", "root", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "identity", "bundle.pem")
	var bundle []byte
	waitFor(t, "the kubelet to write the credential bundle", time.Minute, func() bool {
		var err error
		bundle, err = os.ReadFile(bundlePath)
		return err == nil && len(bundle) > 0
	})
	leaf, err := testcerts.CheckBundle(bundle, trustBundle(t, podIdentity))
	if err != nil {
		t.Fatalf("the bundle the kubelet wrote: %v", err)
	}
	want := fmt.Sprintf("spiffe://cluster.local/ns/%s/sa/web", ns)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		t.Errorf("leaf URI SANs %v, want [%s]", leaf.URIs, want)
	}
	// The kubelet made the request, not trustplane's agent: it names the node and pod.
	requests := testenv.PodCertificateRequestsOf(t, c, ns, "web")
	if len(requests) == 0 || requests[0].Spec.NodeName != nodeName {
		t.Errorf("PodCertificateRequests of the pod: %+v", requests)
	}
}

// testKubeconfigInAPod: a pod using the kubeconfig a KubeconfigRequest issued has exactly
// the rights the request asked for: it lists JWKSConfigs in its namespace, and is
// refused in another.
func testKubeconfigInAPod(t *testing.T) {
	team, other := namespace(t, "team"), namespace(t, "other")
	secretName := issueKubeconfig(t, team)
	run := func(name, ns string) *corev1.Pod {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{
					Name: "client", Image: version.Image("trustplane"),
					Args:         []string{"get", "jwksconfig", "-n", ns, "--kubeconfig", "/etc/issued/kubeconfig"},
					VolumeMounts: []corev1.VolumeMount{{Name: "issued", MountPath: "/etc/issued", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "issued", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}},
			},
		}
		create(t, pod)
		waitFor(t, "pod "+name+" to finish", 2*time.Minute, func() bool {
			get(t, team, name, pod)
			return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		})
		return pod
	}
	if pod := run("allowed", team); pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("listing JWKSConfigs in %s with the issued kubeconfig: %s: %s", team, pod.Status.Phase, podLogs(t, team, "allowed"))
	}
	if pod := run("refused", other); pod.Status.Phase != corev1.PodFailed || !strings.Contains(podLogs(t, team, "refused"), "forbidden") {
		t.Errorf("listing JWKSConfigs in %s with the issued kubeconfig: %s, want forbidden: %s", other, pod.Status.Phase, podLogs(t, team, "refused"))
	}
}

// leader is the pod holding the manager's lease ("" when none does).
func leader(t *testing.T) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: "trustplane-manager"}, lease); err != nil {
		return ""
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	name, _, _ := strings.Cut(holder, "_")
	return name
}

func podNames(t *testing.T, ns, selector string) map[string]bool {
	t.Helper()
	pods := &corev1.PodList{}
	sel, err := metav1.ParseToLabelSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := metav1.LabelSelectorAsSelector(sel)
	if err := c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: ls}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names[p.Name] = true
		}
	}
	return names
}

func httpGet(url string) string {
	client := http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(body)
}

// tlsLeaf is the certificate a TLS server at addr presents for serverName.
func tlsLeaf(addr, serverName string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}
