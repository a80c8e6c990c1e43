package podcert_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestClockOffsetFileMovesTheShippedAgentsClock: the hidden test hook
// --testing-clock-offset-file (how test/chaos jumps a node agent's clock: faketime cannot
// move a Go process's) works in the built binary. The agent says so loudly at start; an
// offset written while it runs is applied and logged, and the agent then acts on the
// moved clock: put just past the certificate's refresh point (beyond the agent's 5-minute
// jitter, short of the 10 minutes that make a refresh overdue), it refreshes hours early
// and warns of nothing. Set back to 0, it stops refreshing.
func TestClockOffsetFileMovesTheShippedAgentsClock(t *testing.T) {
	ns := env.Namespace(t, "clock")
	const node = "node-clock"
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
	pod := annotatedPod(ns, "web", node, signer, "")
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	offsetFile := filepath.Join(t.TempDir(), "offset")
	setOffset := func(offset string) {
		t.Helper()
		if err := os.WriteFile(offsetFile+".tmp", []byte(offset), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(offsetFile+".tmp", offsetFile); err != nil {
			t.Fatal(err)
		}
	}
	setOffset("0s")
	p := startShippedAgent(t, agent, node, dir, "--refresh-interval=200ms", "--testing-clock-offset-file="+offsetFile)
	if !strings.Contains(p.Output(), "TEST HOOK: --testing-clock-offset-file is set") {
		t.Errorf("the agent does not say at start that its clock is a test's:\n%s", p.Output())
	}
	waitBundle(t, dir, ns, pod.Name)
	first := requests(t, ns)
	if len(first) != 1 || first[0].Status.BeginRefreshAt == nil {
		t.Fatalf("want one issued request, got %d", len(first))
	}

	offset := time.Until(first[0].Status.BeginRefreshAt.Time) + 6*time.Minute
	setOffset(offset.String())
	testenv.Eventually(t, "the offset applied", 10*time.Second, func() bool {
		return strings.Contains(p.Output(), `"offset":"`+offset.String()+`"`)
	})
	testenv.Eventually(t, "a refresh hours early, on the moved clock", 30*time.Second, func() bool { return len(requests(t, ns)) > 1 })
	if time.Now().After(first[0].Status.BeginRefreshAt.Time) {
		t.Fatal("the real clock reached the refresh point: the test proves nothing")
	}

	mark := len(p.Output())
	setOffset("0")
	testenv.Eventually(t, "the offset taken back", 10*time.Second, func() bool { return strings.Contains(p.Output()[mark:], `"offset":"0s"`) })
	time.Sleep(time.Second) // whatever was asked on the moved clock is issued meanwhile
	settled := len(requests(t, ns))
	time.Sleep(3 * time.Second) // fifteen refresh passes
	if n := len(requests(t, ns)); n != settled {
		t.Errorf("on the real clock again, the agent still refreshes: %d requests, then %d", settled, n)
	}
	for _, reason := range []string{certificates.ReasonOverdueForRefresh, certificates.ReasonExpired} {
		if events := warnings(t, ns, pod.Name, reason); len(events) != 0 {
			t.Errorf("%d %s events: the clock never went past the refresh point by 10 minutes, nor past notAfter", len(events), reason)
		}
	}
}

// requests are the PodCertificateRequests in ns.
func requests(t *testing.T, ns string) []certificatesv1.PodCertificateRequest {
	t.Helper()
	list := &certificatesv1.PodCertificateRequestList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
