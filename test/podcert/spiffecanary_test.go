package podcert_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestPreviewBundleReachesOnlyCanaries (issue 43): with a canaried rotation, the next CA an
// operator supplies is published in the preview bundle; the node agent as shipped
// (--layout=spiffe) writes it into the trust bundle of the pod in the namespace labelled a
// canary, and not into the other pod's — which gets it once the next CA goes live. The
// canary is chosen by a label on its namespace, through the selectors the signer writes
// on the preview bundle.
func TestPreviewBundleReachesOnlyCanaries(t *testing.T) {
	canaryNS, plainNS := env.Namespace(t, "preview-canary"), env.Namespace(t, "preview-plain")
	const node = "node-preview"
	agent := testenv.Rendered(t, "config/node-agent")
	env.Install(t, agent)
	objs := []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}
	for _, ns := range []string{canaryNS, plainNS} {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, annotatedPod(ns, "web", node, signer, ""))
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: canaryNS}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels[certificates.LabelCanary] = "true"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace, signerOpts.CanaryObservation = canaryNS, time.Hour
	stopSigner := env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })

	dir := t.TempDir()
	startShippedAgent(t, agent, node, dir,
		"--layout="+nodeagent.LayoutSPIFFE, "--refresh-interval=1h")
	trustFile := spiffeid.RequireTrustDomainFromString(signerOpts.TrustDomain).Name() + nodeagent.TrustBundleSuffix
	canaryFolder := waitSPIFFEFolder(t, dir, canaryNS, "web", trustFile)
	plainFolder := waitSPIFFEFolder(t, dir, plainNS, "web", trustFile)

	// The operator supplies the next CA.
	next, err := podcert.NewCA("next", time.Now(), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: canaryNS, Name: signerOpts.CASecretName}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[podcert.NextCertKey], secret.Data[podcert.NextKeyKey] = next.CertPEM, next.KeyPEM
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	holds := func(folder string) bool {
		raw, err := os.ReadFile(filepath.Join(folder, trustFile))
		return err == nil && strings.Contains(string(raw), string(next.CertPEM))
	}
	testenv.Eventually(t, "the next CA in the canary pod's trust bundle", 60*time.Second, func() bool { return holds(canaryFolder) })
	// The plain pod's folder was written with the same watch event: it must not hold it.
	time.Sleep(2 * time.Second)
	if holds(plainFolder) {
		t.Fatal("the next CA reached a pod that is no canary while it was in preview")
	}
	if s := secretStatus(t, canaryNS, signerOpts.CASecretName); !strings.HasPrefix(s, certificates.ReasonCAPreview) {
		t.Errorf("rotation status %q, want %s (observing the canary namespace)", s, certificates.ReasonCAPreview)
	}
	// Live, the next CA reaches every pod: here by the signer restarted without canaries
	// (a next CA in preview then goes live at once; the observation itself is
	// internal/podcert/podcertsigner TestCanariedRotationTimeline's).
	stopSigner()
	env.RunManager(t, func(mgr ctrl.Manager) error {
		o := signerOpts
		o.CanaryObservation = 0 // a next CA is live at once without canaries
		_, err := podcertsigner.Setup(mgr, o)
		return err
	})
	testenv.Eventually(t, "the live next CA in every pod's trust bundle", 60*time.Second, func() bool { return holds(plainFolder) && holds(canaryFolder) })
}

func secretStatus(t *testing.T, ns, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Annotations[certificates.AnnotationCARotationStatus]
}
