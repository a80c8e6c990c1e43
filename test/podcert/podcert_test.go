// Package podcert tests pod certificates end to end against a real API server: the node
// agent requests, the signer issues, bundles verify against the CA, refresh comes before
// notAfter, and with the signer stopped the overdue and expired events reach the Pod once
// each while the metric states change.
package podcert_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	os.Exit(testenv.Main(m, &env))
}

const signer = "trustplane.io/pod-identity"

func stateCount(t *testing.T, state string) float64 {
	t.Helper()
	families, _ := metrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() != "trustplane_podcertificate_states" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["signer_name"] == signer && labels["state"] == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func podEvents(t *testing.T, reason string) int {
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace("apps")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == "web" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			n++
		}
	}
	return n
}

// bundle reads the credential bundle; ok is false while there is none. A bundle that is
// there but wrong fails the test.
func bundle(t *testing.T, path string, roots *x509.CertPool) (*x509.Certificate, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	leaf, err := testcerts.CheckBundle(raw, roots)
	if err != nil {
		t.Fatal(err)
	}
	return leaf, true
}

func TestPodCertificatesEndToEnd(t *testing.T) {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}},
		// Opted in: kubelet would serve its volume otherwise.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Annotations: map[string]string{nodeagent.ServeAnnotation: nodeagent.ServeAgent}}, Spec: corev1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}},
			Volumes: []corev1.Volume{{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: signer, KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To[int32](3600), CredentialBundlePath: "bundle.pem",
					KeyPath: "tls/key.pem", CertificateChainPath: "tls/chain.pem"}}}}}}},
		}},
		// A pod on another node: never this agent's business.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "elsewhere", Annotations: map[string]string{nodeagent.SignerAnnotation: signer}},
			Spec: corev1.PodSpec{NodeName: "node-b", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	signerOpts := podcertsigner.DefaultOptions()
	signerOpts.CANamespace = "default"
	stopSigner := env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })

	clk := clocktesting.NewFakeClock(time.Now())
	dir := t.TempDir()
	agentOpts := nodeagent.DefaultOptions()
	agentOpts.NodeName, agentOpts.Dir, agentOpts.Clock = "node-a", dir, clk
	agentOpts.RefreshInterval = 100 * time.Millisecond
	agentOpts.MetricsBindAddress, agentOpts.HealthProbeBindAddress = "0", "0"
	agentOpts.Jitter = func() time.Duration { return 0 }
	agentOpts.BundleMode, agentOpts.BundleGID = 0o640, os.Getgid()
	testenv.Background(t, func(c context.Context) error { return nodeagent.Run(c, env.Config, agentOpts) })

	path := filepath.Join(dir, "apps", "web", "identity-0", nodeagent.BundleFile)
	var roots *x509.CertPool
	testenv.Eventually(t, "the CA", 30*time.Second, func() bool {
		s := &corev1.Secret{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: signerOpts.CASecretName}, s) != nil {
			return false
		}
		roots = x509.NewCertPool()
		return roots.AppendCertsFromPEM(s.Data[corev1.TLSCertKey])
	})
	var first *x509.Certificate
	testenv.Eventually(t, "the first bundle", 30*time.Second, func() bool { var ok bool; first, ok = bundle(t, path, roots); return ok })
	checkFiles(t, filepath.Join(dir, "apps", "web", "identity-0"), 0o640, os.Getgid())
	if stateCount(t, podcert.StateFresh) != 1 {
		t.Errorf("metric fresh = %v", stateCount(t, podcert.StateFresh))
	}
	if _, err := os.Stat(filepath.Join(dir, "apps", "elsewhere")); !os.IsNotExist(err) {
		t.Error("a pod of another node got a bundle")
	}

	// Refresh: just past beginRefreshAt (before notAfter), a new certificate arrives.
	pcrs := &certificatesv1.PodCertificateRequestList{}
	if err := env.Client.List(ctx, pcrs, client.InNamespace("apps")); err != nil || len(pcrs.Items) != 1 {
		t.Fatalf("PCRs: %v %d", err, len(pcrs.Items))
	}
	begin := pcrs.Items[0].Status.BeginRefreshAt.Time
	clk.SetTime(begin.Add(time.Second))
	var second *x509.Certificate
	testenv.Eventually(t, "the refreshed bundle", 30*time.Second, func() bool {
		leaf, ok := bundle(t, path, roots)
		second = leaf
		return ok && leaf.SerialNumber.Cmp(first.SerialNumber) != 0
	})
	if !clk.Now().Before(first.NotAfter) {
		t.Error("refreshed only after notAfter")
	}
	if podEvents(t, certificates.ReasonOverdueForRefresh)+podEvents(t, certificates.ReasonExpired) != 0 {
		t.Error("warnings during a healthy refresh")
	}
	clk.SetTime(time.Now()) // the new certificate's times are real ones

	// The signer stops; time passes the refresh point, then the certificate's end.
	stopSigner()
	pcrs = &certificatesv1.PodCertificateRequestList{}
	_ = env.Client.List(ctx, pcrs, client.InNamespace("apps"))
	var latestBegin time.Time
	for _, p := range pcrs.Items {
		if p.Status.BeginRefreshAt != nil && p.Status.BeginRefreshAt.After(latestBegin) {
			latestBegin = p.Status.BeginRefreshAt.Time
		}
	}
	clk.SetTime(latestBegin.Add(11 * time.Minute))
	testenv.Eventually(t, "CertificateOverdueForRefresh on the Pod", 30*time.Second, func() bool { return podEvents(t, certificates.ReasonOverdueForRefresh) == 1 })
	testenv.Eventually(t, "metric overdue_for_refresh", 30*time.Second, func() bool { return stateCount(t, podcert.StateOverdueForRefresh) == 1 })
	clk.SetTime(second.NotAfter.Add(time.Minute))
	testenv.Eventually(t, "CertificateExpired on the Pod", 30*time.Second, func() bool { return podEvents(t, certificates.ReasonExpired) == 1 })
	testenv.Eventually(t, "metric expired", 30*time.Second, func() bool { return stateCount(t, podcert.StateExpired) == 1 })
	time.Sleep(time.Second) // ten more refresh passes
	if podEvents(t, certificates.ReasonOverdueForRefresh) != 1 || podEvents(t, certificates.ReasonExpired) != 1 {
		t.Errorf("events repeated: overdue %d, expired %d", podEvents(t, certificates.ReasonOverdueForRefresh), podEvents(t, certificates.ReasonExpired))
	}
	if leaf, ok := bundle(t, path, roots); !ok || leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Error("the expired credential is no longer served")
	}

	// The pod goes away: its credentials go too.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the pod's directory to be removed", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "apps", "web"))
		return os.IsNotExist(err)
	})

	// A pod that opted in by annotation and then opts out loses its credentials.
	clk.SetTime(time.Now())
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, signerOpts); return err })
	opted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "opted", Annotations: map[string]string{nodeagent.SignerAnnotation: signer}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := env.Client.Create(ctx, opted); err != nil {
		t.Fatal(err)
	}
	optedDir := filepath.Join(dir, "apps", "opted")
	testenv.Eventually(t, "the opted-in pod's bundle", 30*time.Second, func() bool { _, err := os.Stat(optedDir); return err == nil })
	patch := client.MergeFrom(opted.DeepCopy())
	delete(opted.Annotations, nodeagent.SignerAnnotation)
	if err := env.Client.Patch(ctx, opted, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the opted-out pod's directory to be removed", 30*time.Second, func() bool {
		_, err := os.Stat(optedDir)
		return os.IsNotExist(err)
	})
}

// checkFiles checks a projection's files: credentialbundle.pem and bundle.pem are the key
// then the chain, tls/key.pem the key, tls/chain.pem the chain; all with mode and gid, and
// their directories searchable by that group.
func checkFiles(t *testing.T, projectionDir string, mode os.FileMode, gid int) {
	t.Helper()
	read := func(name string) []byte {
		path := filepath.Join(projectionDir, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkOwner(t, path, mode, gid)
		return raw
	}
	bundle, key, chain := read(nodeagent.BundleFile), read("tls/key.pem"), read("tls/chain.pem")
	if !bytes.Equal(read("bundle.pem"), bundle) {
		t.Error("credentialBundlePath differs from " + nodeagent.BundleFile)
	}
	if !bytes.Equal(append(append([]byte(nil), key...), chain...), bundle) {
		t.Error("the bundle is not keyPath's content then certificateChainPath's")
	}
	if b, _ := pem.Decode(key); b == nil || b.Type != "PRIVATE KEY" {
		t.Error("keyPath holds no PRIVATE KEY")
	}
	if b, rest := pem.Decode(chain); b == nil || b.Type != "CERTIFICATE" || bytes.Contains(rest, []byte("PRIVATE KEY")) {
		t.Error("certificateChainPath is not certificates only")
	}
	dirMode := os.ModeDir | 0o700 | mode&0o044 | (mode&0o044)>>2
	for _, d := range []string{filepath.Dir(filepath.Dir(projectionDir)), filepath.Dir(projectionDir), projectionDir, filepath.Join(projectionDir, "tls")} {
		checkOwner(t, d, dirMode, gid)
	}
}

func checkOwner(t *testing.T, path string, mode os.FileMode, gid int) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != mode {
		t.Errorf("%s: mode %v, want %v", path, info.Mode(), mode)
	}
	if st := info.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
		t.Errorf("%s: gid %d, want %d", path, st.Gid, gid)
	}
}
