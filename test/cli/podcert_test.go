package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// issuePodCertificates runs the CA-backed signer (its CA in ns) and a node agent for
// node until the test ends, and waits until a PodCertificateRequest of ns is issued.
func issuePodCertificates(t *testing.T, ns, node string) {
	t.Helper()
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace = ns
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })
	agentOpts := nodeagent.DefaultOptions()
	agentOpts.NodeName, agentOpts.Dir = node, t.TempDir()
	agentOpts.RefreshInterval = 100 * time.Millisecond
	agentOpts.MetricsBindAddress, agentOpts.HealthProbeBindAddress = "0", "0"
	agentOpts.Jitter = func() time.Duration { return 0 }
	testenv.Background(t, func(c context.Context) error { return nodeagent.Run(c, env.Config, agentOpts) })
	testenv.Eventually(t, "an issued PodCertificateRequest", 60*time.Second, func() bool {
		return strings.Contains(tp(t, "get", "pcr", "-n", ns).stdout, podcert.StateFresh)
	})
}

// TestPodcertInspect runs the CA-backed signer and a node agent, so a pod gets a real
// certificate, and inspects it.
func TestPodcertInspect(t *testing.T) {
	const signer = "trustplane.io/pod-identity"
	ns := env.Namespace(t, "podcert")
	projection := func(signerName, path string) corev1.VolumeProjection {
		return corev1.VolumeProjection{PodCertificate: &corev1.PodCertificateProjection{SignerName: signerName, KeyType: "ECDSAP256",
			MaxExpirationSeconds: ptr.To[int32](3600), CredentialBundlePath: path}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{nodeagent.ServeAnnotation: nodeagent.ServeAgent}},
		Spec: corev1.PodSpec{NodeName: "cli-node", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}},
			Volumes: []corev1.Volume{{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{projection(signer, "bundle.pem"), projection("example.com/nobody", "other.pem")}}}}}}}
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cli-node"}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, pod)

	issuePodCertificates(t, ns, "cli-node")
	// A warning as the node agent sends it when a refresh is overdue.
	create(t, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web.overdue"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "web", UID: pod.UID},
		Reason:         certificates.ReasonOverdueForRefresh, Message: podcert.MessageOverdueForRefresh, Type: corev1.EventTypeWarning, LastTimestamp: metav1.Now(),
		Source: corev1.EventSource{Component: "trustplane-node-agent"}})

	out := tp(t, "podcert", "inspect", "web", "-n", ns).ok(t)
	contains(t, out,
		"Pod "+ns+"/web node cli-node, ServiceAccount web",
		"├─volume identity, source 0: trustplane.io/pod-identity ECDSAP256 state fresh",
		"certificate notAfter ", "beginRefreshAt ",
		"PodCertificateRequest ", ": Issued",
		"├─volume identity, source 1: example.com/nobody ECDSAP256 state not_yet_issued",
		"Pending: ", "is pending for ",
		"└─Warnings",
		"Warning CertificateOverdueForRefresh: PodCertificate refresh overdue")
	out = tp(t, "describe", "pod", "web", "-n", ns).ok(t)
	contains(t, out, "state fresh", "Events", "CertificateOverdueForRefresh")

	out = tp(t, "get", "pcr", "-n", ns).fails(t, "1 of 2 objects are not Ready")
	contains(t, out, "NAME", "POD", "SIGNER", "STATE", "NOT AFTER", "Pending", "not_yet_issued", "fresh", "in 5")
	out = tp(t, "get", "signerca", "trustplane.io:pod-identity:primary-bundle").ok(t)
	contains(t, out, "True    BundlePublished   trustplane.io/pod-identity   1", "in 9y")

	tp(t, "podcert", "inspect", "nosuch", "-n", ns).fails(t, `pod "nosuch" not found in namespace "`+ns+`"`)
}

// TestPodcertInspectAnnotatedPod: a pod opted in by annotation (no projected volume; the
// node agent serves its certificate) is inspected as the agent serves it, its request and
// state, by podcert inspect and describe pod.
func TestPodcertInspectAnnotatedPod(t *testing.T) {
	const signer, node = "trustplane.io/pod-identity", "cli-node-annotated"
	ns := env.Namespace(t, "podcert")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api", Annotations: map[string]string{certificates.SignerAnnotation: signer}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "api", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}}, pod)

	issuePodCertificates(t, ns, node)

	out := tp(t, "podcert", "inspect", "api", "-n", ns).ok(t)
	contains(t, out,
		"Pod "+ns+"/api node "+node+", ServiceAccount api",
		"├─annotation "+certificates.SignerAnnotation+" (served by the node agent, no volume): "+signer+" ECDSAP256 state fresh",
		"certificate notAfter ", "beginRefreshAt ",
		"PodCertificateRequest ", ": Issued")
	out = tp(t, "describe", "pod", "api", "-n", ns).ok(t)
	contains(t, out, "annotation "+certificates.SignerAnnotation+" (served by the node agent, no volume): "+signer+" ECDSAP256 state fresh")
	for _, o := range []string{out, tp(t, "podcert", "inspect", "api", "-n", ns).stdout} {
		if strings.Contains(o, "no podCertificate projection") {
			t.Errorf("an annotated pod with its certificate is said to have none:\n%s", o)
		}
	}
}
