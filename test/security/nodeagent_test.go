package security

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

const (
	agentNamespace = "trustplane-node-agent" // config/node-agent's
	agentAccount   = "trustplane-node-agent"
	agentNode      = "node-a" // the compromised node
	victimNode     = "node-b"
	podSigner      = "trustplane.io/pod-identity" // the manager's default
)

// TestANodeAgentCannot: the node agent runs as root on every node, and one node may be
// compromised. Its ServiceAccount (the rendered config/node-agent: RBAC and admission
// policy) must yield no other node's workload identity from the manager's signer, and
// what a pod plants in its own bundle directory must not lead the agent out of --dir.
func TestANodeAgentCannot(t *testing.T) {
	startManager(t)
	agent := testenv.Rendered(t, "config/node-agent")
	env.Install(t, agent)
	for _, n := range []string{agentNode, victimNode} {
		mustCreate(t, env.Client, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	t.Run("get a certificate for another node's pod", getAnotherNodesCertificate)
	t.Run("follow a link out of its directory", func(t *testing.T) {
		followLinkOutOfItsDirectory(t, testenv.PodSpecOf(t, agent, "DaemonSet", "trustplane-node-agent"))
	})
}

// getAnotherNodesCertificate (issue 21, item 4): with the token of the agent of node-a
// (bound to a pod on node-a, so it names node-a in userInfo.extra), a request for a pod of
// node-b with the attacker's key is refused at admission, naming both nodes; so is the
// same request with a token that names no node. A request that names node-a for node-b's
// pod passes admission and is denied by the signer, as is one an admin makes. The
// payments pod gets no certificate and does not change, while the agent's own node's pod
// is issued one.
func getAnotherNodesCertificate(t *testing.T) {
	ns := env.Namespace(t, "workloads")
	own, payments := agentPod(t, ns, "web", agentNode), agentPod(t, ns, "payments", victimNode)
	nodeA := testenv.KubeconfigClient(t, env.PodServiceAccountKubeconfig(t, agentNamespace, agentAccount, agentNode))
	unbound := testenv.KubeconfigClient(t, env.ServiceAccountKubeconfig(t, agentNamespace, agentAccount))

	// The policy came with config/node-agent; the API server takes a moment to load it.
	// A dry run goes through admission and stores nothing.
	var err error
	testenv.Eventually(t, "the admission policy to refuse another node's pod", 30*time.Second, func() bool {
		err = nodeA.Create(ctx, attackerRequest(t, payments, victimNode), client.DryRunAll)
		return err != nil
	})
	if err := nodeA.Create(ctx, attackerRequest(t, payments, victimNode)); err == nil ||
		!strings.Contains(err.Error(), agentNode) || !strings.Contains(err.Error(), victimNode) {
		t.Errorf("node-a's agent asking for node-b's pod: %v, want refused naming both nodes", err)
	}
	if err := unbound.Create(ctx, attackerRequest(t, own, agentNode)); err == nil || !strings.Contains(err.Error(), "names no node") {
		t.Errorf("the agent's ServiceAccount with a token bound to no node: %v, want refused", err)
	}

	// Past admission, the signer: a request naming node-a for node-b's pod, by the agent
	// or by an admin (whom the policy does not restrict).
	for who, c := range map[string]client.Client{"node-a's agent": nodeA, "an admin": env.Client} {
		pcr := attackerRequest(t, payments, agentNode)
		if err := c.Create(ctx, pcr); err != nil {
			t.Fatalf("%s naming node %s: %v", who, agentNode, err)
		}
		denied := waitPodCertificate(t, pcr, certificatesv1.PodCertificateRequestConditionTypeDenied)
		if c := denied.Status.Conditions[0]; c.Reason != certificates.ReasonPodMismatch || !strings.Contains(c.Message, victimNode) {
			t.Errorf("%s: %+v, want %s naming node %s", who, c, certificates.ReasonPodMismatch, victimNode)
		}
	}
	for _, pcr := range testenv.PodCertificateRequestsOf(t, env.Client, ns, payments.Name) {
		if pcr.Status.CertificateChain != "" || pcr.Spec.NodeName != agentNode {
			t.Errorf("PodCertificateRequest %s for node-b's pod: node %s, issued %v", pcr.Name, pcr.Spec.NodeName, pcr.Status.CertificateChain != "")
		}
	}
	unchanged(t, payments)

	// The same token for its own node's pod: admitted and issued (the policy lets the
	// agent work).
	mine := attackerRequest(t, own, agentNode)
	if err := nodeA.Create(ctx, mine); err != nil {
		t.Fatalf("node-a's agent asking for its own node's pod: %v", err)
	}
	waitPodCertificate(t, mine, certificatesv1.PodCertificateRequestConditionTypeIssued)
}

// followLinkOutOfItsDirectory (issue 21, item 5): the agent binary as shipped (rendered
// args, its own pod-bound token, --dir in a temporary directory) serves two pods of its
// node; one pod's bundle directory is a link to a host directory. That directory keeps
// its mode and entries, the pod gets one Warning event, and the other pod its bundle.
func followLinkOutOfItsDirectory(t *testing.T, daemonSet corev1.PodSpec) {
	ns := env.Namespace(t, "linked")
	linked, plain := agentPod(t, ns, "linked", agentNode), agentPod(t, ns, "plain", agentNode)
	dir := t.TempDir()
	host := filepath.Join(t.TempDir(), "host-etc")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "passwd"), []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostBefore := hostState(t, host)
	// Where the agent writes the annotation projection of the pod "linked".
	if err := os.MkdirAll(filepath.Join(dir, ns, linked.Name), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(dir, ns, linked.Name, "podcert-annotation-0")); err != nil {
		t.Fatal(err)
	}

	probes := testenv.FreeAddr(t)
	args := testenv.ArgsOf(t, testenv.ContainerOf(t, daemonSet, "node-agent"), map[string]string{"spec.nodeName": agentNode},
		"--kubeconfig="+env.PodServiceAccountKubeconfig(t, agentNamespace, agentAccount, agentNode),
		"--dir="+dir, "--metrics-bind-address="+testenv.FreeAddr(t), "--health-probe-bind-address="+probes)
	p := testenv.StartProcess(t, testenv.Binary(t), args...)
	p.WaitHTTP200(t, fmt.Sprintf("http://%s/readyz", probes), 60*time.Second)

	var bundles []string
	testenv.Eventually(t, "the other pod's bundle", 60*time.Second, func() bool {
		bundles, _ = filepath.Glob(filepath.Join(dir, ns, plain.Name, "*", nodeagent.BundleFile))
		return len(bundles) == 1
	})
	checkIssuedBundle(t, bundles[0])
	// The agent reports the write it refused (once its certificate is issued); an agent
	// following the link would change the host directory instead.
	testenv.Eventually(t, "the agent to refuse the link, or write through it", 30*time.Second, func() bool {
		return len(testenv.WarningEvents(t, env.Client, ns, linked.Name, certificates.ReasonBundlePathRefused)) > 0 ||
			!slices.Equal(hostState(t, host), hostBefore)
	})

	if after := hostState(t, host); !slices.Equal(after, hostBefore) {
		t.Errorf("the host directory changed:\n%q\n→\n%q", hostBefore, after)
	}
	if raw, err := os.ReadFile(filepath.Join(host, "passwd")); err != nil || string(raw) != "root:x:0:0\n" {
		t.Errorf("the host file changed: %q %v", raw, err)
	}
	if events := testenv.WarningEvents(t, env.Client, ns, linked.Name, certificates.ReasonBundlePathRefused); len(events) != 1 ||
		!strings.Contains(events[0].Note, "symbolic link") {
		t.Errorf("want one Warning event naming the link, got %+v", events)
	}
	unchanged(t, linked)
}

// agentPod is a pod on node asking the node agent for a certificate (the annotation
// needs no volume), running as its own ServiceAccount.
func agentPod(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	mustCreate(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{nodeagent.SignerAnnotation: podSigner}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: name, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	mustCreate(t, env.Client, pod)
	return pod
}

// attackerRequest asks for pod's identity with a fresh key (the attacker's), naming node.
func attackerRequest(t *testing.T, pod *corev1.Pod, node string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	sa, n := &corev1.ServiceAccount{}, &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}, sa); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	_, proof, err := podcert.GenerateKeyAndProof("ECDSAP256")
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: podSigner, PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: sa.Name, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(node), NodeUID: n.UID, MaxExpirationSeconds: ptr.To[int32](3600), StubPKCS10Request: proof,
		},
	}
}

// waitPodCertificate waits for the signer's verdict on pcr and fails unless it is want.
func waitPodCertificate(t *testing.T, pcr *certificatesv1.PodCertificateRequest, want string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	got := &certificatesv1.PodCertificateRequest{}
	testenv.Eventually(t, "the signer's verdict on "+pcr.Name, 30*time.Second, func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(pcr), got) == nil && len(got.Status.Conditions) > 0
	})
	if c := got.Status.Conditions[0]; c.Type != want {
		t.Errorf("PodCertificateRequest %s/%s: %s %s %q, want %s", got.Namespace, got.Name, c.Type, c.Reason, c.Message, want)
	}
	return got
}

// checkIssuedBundle verifies a bundle against the signer's CA.
func checkIssuedBundle(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ca := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "trustplane-pod-identity-ca"}, ca); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.Data[corev1.TLSCertKey])
	if _, err := testcerts.CheckBundle(raw, roots); err != nil {
		t.Error(err)
	}
}

// hostState lists every entry below dir with its mode, owner, size and modification time.
func hostState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		out = append(out, fmt.Sprintf("%s %v %d:%d %d %v", path, info.Mode(), st.Uid, st.Gid, info.Size(), info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
