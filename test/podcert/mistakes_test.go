package podcert_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestMistakesAreReportedOnce (issue 22, item 5): the node agent as shipped (the built
// binary, the DaemonSet's args, its own pod-bound token) serves pods that ask for what it
// cannot get: a key type it cannot generate and a malformed signer name in the opt-in
// annotations (no admission checks those), a misspelled signer name in a volume (the API
// server lets any well-formed name in), and a ServiceAccount that does not exist. Each pod
// gets one Warning event naming the problem, the log says it once at info and never as an
// error, and a corrected pod is issued — and reported again when it goes wrong again.
func TestMistakesAreReportedOnce(t *testing.T) {
	ns := env.Namespace(t, "mistakes")
	const node = "node-mistakes"
	agent := testenv.Rendered(t, "config/node-agent")
	env.Install(t, agent)
	for _, obj := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace = ns
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })

	good := annotatedPod(ns, "good", node, signer, "")
	weakKey := annotatedPod(ns, "weak-key", node, signer, "RSA1024")
	noDomain := annotatedPod(ns, "no-domain", node, "pod-identity", "")
	typo := volumePod(ns, "typo", node, "trustplane.io/pod-identty")
	noAccount := annotatedPod(ns, "no-account", node, signer, "")
	noAccount.Spec.ServiceAccountName = "ghost"
	for _, p := range []*corev1.Pod{good, weakKey, noDomain, typo, noAccount} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	p := startShippedAgent(t, agent, node, dir,
		// Many refresh passes, each a chance to report a mistake again.
		"--refresh-interval=200ms")
	waitBundle(t, dir, ns, good.Name)

	supported := `supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`
	mistakes := []struct {
		pod, reason string
		says        []string
	}{
		{weakKey.Name, certificates.ReasonInvalidProjection, []string{`metadata.annotations[podcert.trustplane.io/key-type]: Unsupported value: "RSA1024"`, supported}},
		{noDomain.Name, certificates.ReasonInvalidProjection, []string{`metadata.annotations[podcert.trustplane.io/signer-name]: Invalid value: "pod-identity": must be a fully qualified domain`}},
		{typo.Name, certificates.ReasonUnknownSigner, []string{`waiting for signer "trustplane.io/pod-identty"`, `did you mean "trustplane.io/pod-identity"?`}},
		{noAccount.Name, certificates.ReasonServiceAccountNotFound, []string{`ServiceAccount "ghost" not found in namespace ` + ns}},
	}
	for _, m := range mistakes {
		testenv.Eventually(t, m.reason+" on pod "+m.pod, 60*time.Second, func() bool { return len(warnings(t, ns, m.pod, m.reason)) > 0 })
	}
	time.Sleep(2 * time.Second) // ten refresh passes more
	for _, m := range mistakes {
		note := onlyOnce(t, ns, m.pod, m.reason)
		for _, want := range m.says {
			if !strings.Contains(note, want) {
				t.Errorf("the %s event on %s does not say %s: %q", m.reason, m.pod, want, note)
			}
		}
	}
	checkLoggedOnce(t, p.Output(), map[string]string{weakKey.Name: certificates.ReasonInvalidProjection,
		noDomain.Name: certificates.ReasonInvalidProjection, typo.Name: "unknown signer", noAccount.Name: certificates.ReasonServiceAccountNotFound})

	// The ServiceAccount created, the next pass requests and the pod is issued.
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"}}); err != nil {
		t.Fatal(err)
	}
	waitBundle(t, dir, ns, noAccount.Name)

	// Corrected, the pod is issued; wrong again, it is reported again.
	setAnnotation(t, weakKey, nodeagent.KeyTypeAnnotation, "ED25519")
	waitBundle(t, dir, ns, weakKey.Name)
	setAnnotation(t, weakKey, nodeagent.KeyTypeAnnotation, "RSA1024")
	testenv.Eventually(t, "the mistake made again reported again", 30*time.Second, func() bool {
		return eventCount(warnings(t, ns, weakKey.Name, certificates.ReasonInvalidProjection)) == 2
	})
}

func annotatedPod(ns, name, node, signerName, keyType string) *corev1.Pod {
	annotations := map[string]string{nodeagent.SignerAnnotation: signerName}
	if keyType != "" {
		annotations[nodeagent.KeyTypeAnnotation] = keyType
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
}

func volumePod(ns, name, node, signerName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{nodeagent.ServeAnnotation: nodeagent.ServeAgent}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}},
			Volumes: []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: signerName, KeyType: "ECDSAP256", CredentialBundlePath: "bundle.pem"}}}}}}}}}
}

func waitBundle(t *testing.T, dir, ns, pod string) {
	t.Helper()
	testenv.Eventually(t, "a credential bundle for pod "+pod, 60*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(dir, ns, pod, "*", nodeagent.BundleFile))
		return len(found) == 1
	})
}

func setAnnotation(t *testing.T, pod *corev1.Pod, key, value string) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value))
	if err := env.Client.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
}

// eventCount is how often the events were emitted: a repeated event is one object whose
// series counts the repeats.
func eventCount(events []eventsv1.Event) int {
	n := 0
	for _, e := range events {
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// onlyOnce returns the note of the one event with reason on pod, failing unless it was
// emitted exactly once.
func onlyOnce(t *testing.T, ns, pod, reason string) string {
	t.Helper()
	events := warnings(t, ns, pod, reason)
	if n := eventCount(events); n != 1 {
		t.Errorf("%d %s events on pod %s, want one", n, reason, pod)
	}
	if len(events) == 0 {
		return ""
	}
	return events[0].Note
}

// checkLoggedOnce: each pod's mistake is logged once, with what it is about, and nothing
// about the pod is logged as an error (with a stack trace).
func checkLoggedOnce(t *testing.T, output string, about map[string]string) {
	t.Helper()
	lines := strings.Split(output, "\n")
	for pod, what := range about {
		n := 0
		for _, line := range lines {
			if !strings.Contains(line, `"`+pod+`"`) && !strings.Contains(line, "/"+pod+`"`) {
				continue
			}
			if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "stacktrace") {
				t.Errorf("pod %s logged as an error: %s", pod, line)
			}
			if strings.Contains(line, what) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("pod %s: %d log lines saying %q, want one; output:\n%s", pod, n, what, output)
		}
	}
}

// startShippedAgent runs the node agent as shipped for node: the built binary with the
// DaemonSet's args (agent, config/node-agent rendered), under its own pod-bound token,
// writing into dir, with extra flags after; it returns once the agent is ready.
func startShippedAgent(t *testing.T, agent []*unstructured.Unstructured, node, dir string, extra ...string) *testenv.Process {
	t.Helper()
	probes := testenv.FreeAddr(t)
	args := append([]string{"--kubeconfig=" + env.PodServiceAccountKubeconfig(t, "trustplane-node-agent", "trustplane-node-agent", node),
		"--dir=" + dir, "--metrics-bind-address=0", "--health-probe-bind-address=" + probes}, extra...)
	p := testenv.StartProcess(t, testenv.Binary(t), testenv.ArgsOf(t, testenv.ContainerOf(t, testenv.PodSpecOf(t, agent, "DaemonSet", "trustplane-node-agent"), "node-agent"),
		map[string]string{"spec.nodeName": node}, args...)...)
	p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
	return p
}
