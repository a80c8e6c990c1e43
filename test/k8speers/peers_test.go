package k8speers

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/podcertificate"
	"k8s.io/kubernetes/test/utils/hermeticpodcertificatesigner"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/api/certificates"
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
		klog.SetLogger(logr.Discard())
	}
	os.Exit(testenv.Main(m, &env))
}

const signer = "trustplane.io/pod-identity"

// podManager is kubelet's pod manager as its PodCertificate manager sees it: the pods
// bound to the node.
type podManager struct {
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
}

func (p *podManager) GetPodByUID(uid types.UID) (*corev1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[uid]
	return pod, ok
}

func (p *podManager) GetPods() []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod)
	}
	return out
}

// kubelet runs kubelet's own PodCertificate manager for node as kubelet.go wires it:
// a PodCertificateRequest informer on the node's requests, a Node informer, an event
// recorder writing to the API server as component "kubelet", and clk.
func kubelet(t *testing.T, node string, clk clock.WithTicker, pods ...*corev1.Pod) *podcertificate.IssuingManager {
	t.Helper()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	byNode := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	nodes := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	}))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node})
	pm := &podManager{pods: map[types.UID]*corev1.Pod{}}
	for _, p := range pods {
		pm.pods[p.UID] = p
	}
	m := podcertificate.NewIssuingManager(kc, pm, recorder, byNode.Certificates().V1().PodCertificateRequests(), nodes.Core().V1().Nodes(), types.NodeName(node), clk)
	c, cancel := context.WithCancel(ctx)
	byNode.Start(c.Done())
	nodes.Start(c.Done())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(c) }()
	t.Cleanup(func() { cancel(); <-done; broadcaster.Shutdown() })
	for _, p := range pods {
		m.TrackPod(c, p)
	}
	return m
}

// agent runs trustplane's node agent for node with its default serving rule.
func agent(t *testing.T, node, dir string, clk clock.PassiveClock, change func(*nodeagent.Options)) {
	t.Helper()
	opts := nodeagent.DefaultOptions()
	opts.NodeName, opts.Dir, opts.Clock = node, dir, clk
	opts.RefreshInterval = 100 * time.Millisecond
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.Jitter = func() time.Duration { return 0 }
	if change != nil {
		change(&opts)
	}
	testenv.Background(t, func(c context.Context) error { return nodeagent.Run(c, env.Config, opts) })
}

// trustplaneSigner runs trustplane's signer (as `trustplane manager` does) with its CA in
// ns and returns a stop function.
func trustplaneSigner(t *testing.T, ns string) func() {
	t.Helper()
	opts := podcertsigner.DefaultOptions()
	opts.CANamespace = ns
	return env.RunManager(t, func(mgr ctrl.Manager) error { _, err := podcertsigner.Setup(mgr, opts); return err })
}

// signerRoots is the trustplane signer's CA (it creates it with the first request); nil
// while there is none.
func signerRoots(t *testing.T, ns string) *x509.CertPool {
	t.Helper()
	s := &corev1.Secret{}
	if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: podcertsigner.DefaultOptions().CASecretName}, s) != nil {
		return nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[corev1.TLSCertKey]) {
		return nil
	}
	return roots
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func podWith(ns, name, node string, annotations map[string]string, sources ...corev1.VolumeProjection) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if len(sources) > 0 {
		pod.Spec.Volumes = []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}}}
	}
	return pod
}

func certSource(signerName, keyType string) corev1.VolumeProjection {
	return corev1.VolumeProjection{PodCertificate: &corev1.PodCertificateProjection{
		SignerName: signerName, KeyType: keyType, MaxExpirationSeconds: ptr.To[int32](3600), CredentialBundlePath: "bundle.pem"}}
}

func requestsOf(t *testing.T, ns, podName string) []certificatesv1.PodCertificateRequest {
	t.Helper()
	return testenv.PodCertificateRequestsOf(t, env.Client, ns, podName)
}

// warnings counts the Warning events with reason on a pod, whoever wrote them (kubelet's
// recorder writes core/v1 Events, the agent's events.k8s.io/v1: one resource). An event
// repeated by kubelet's correlator counts as many times as it happened.
func warnings(t *testing.T, ns, podName, reason string) int {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == podName && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			n += max(1, int(e.Count))
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// checkKubeletBundle checks the credential kubelet's manager serves for one source: a
// PKCS#8 key and a chain whose leaf carries that key and chains to roots.
func checkKubeletBundle(m *podcertificate.IssuingManager, pod *corev1.Pod, sourceIndex int, roots *x509.CertPool) (*x509.Certificate, error) {
	key, chain, err := m.GetPodCertificateCredentialBundle(ctx, pod.Namespace, pod.Name, string(pod.UID), "id", sourceIndex)
	if err != nil {
		return nil, err
	}
	return testcerts.CheckBundle(append(append([]byte(nil), key...), chain...), roots)
}

// TestOneManagerPerProjection runs kubelet's manager and trustplane's agent on one node:
// each projection gets one PodCertificateRequest per issuance and one warning of each
// kind, whoever serves it. The agent, by default, leaves podCertificate volumes to kubelet
// and serves the pods that opted in by annotation.
func TestOneManagerPerProjection(t *testing.T) {
	ns := env.Namespace(t, "beside")
	const node = "node-beside"
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	byKubelet := podWith(ns, "by-kubelet", node, nil, certSource(signer, "ECDSAP256"))
	byAgent := podWith(ns, "by-agent", node, map[string]string{nodeagent.SignerAnnotation: signer})
	create(t, byKubelet, byAgent)
	stopSigner := trustplaneSigner(t, ns)

	clk := clocktesting.NewFakeClock(time.Now())
	dir := t.TempDir()
	agent(t, node, dir, clk, nil)
	kubeletManager := kubelet(t, node, clk, byKubelet, byAgent)

	var roots *x509.CertPool
	testenv.Eventually(t, "kubelet's credential for its pod", 60*time.Second, func() bool {
		if roots = signerRoots(t, ns); roots == nil {
			return false
		}
		_, err := checkKubeletBundle(kubeletManager, byKubelet, 0, roots)
		return err == nil
	})
	agentBundle := filepath.Join(dir, ns, byAgent.Name, "podcert-annotation-0", nodeagent.BundleFile)
	testenv.Eventually(t, "the agent's credential for its pod", 60*time.Second, func() bool {
		raw, err := os.ReadFile(agentBundle)
		if err != nil {
			return false
		}
		_, err = testcerts.CheckBundle(raw, roots)
		return err == nil
	})
	if _, err := os.Stat(filepath.Join(dir, ns, byKubelet.Name)); !os.IsNotExist(err) {
		t.Error("the agent served a volume kubelet serves")
	}
	if _, _, err := kubeletManager.GetPodCertificateCredentialBundle(ctx, ns, byAgent.Name, string(byAgent.UID), "podcert-annotation", 0); err == nil {
		t.Error("kubelet served the agent's annotation projection")
	}
	time.Sleep(time.Second) // ten agent passes
	counts := func() (int, int) { return len(requestsOf(t, ns, byKubelet.Name)), len(requestsOf(t, ns, byAgent.Name)) }
	if k, a := counts(); k != 1 || a != 1 {
		t.Fatalf("PCRs after issuance: kubelet's pod %d, agent's pod %d; want 1 each", k, a)
	}

	// The signer stops; past the refresh point each manager asks once more and warns once.
	stopSigner()
	var latestBegin, latestEnd time.Time
	for _, name := range []string{byKubelet.Name, byAgent.Name} {
		for _, p := range requestsOf(t, ns, name) {
			if p.Status.BeginRefreshAt != nil && p.Status.BeginRefreshAt.After(latestBegin) {
				latestBegin = p.Status.BeginRefreshAt.Time
			}
			if p.Status.NotAfter != nil && p.Status.NotAfter.After(latestEnd) {
				latestEnd = p.Status.NotAfter.Time
			}
		}
	}
	// kubelet's refresh pass runs every minute of real time: TrackPod queues its pods now.
	poke := func() {
		for _, p := range []*corev1.Pod{byKubelet, byAgent} {
			kubeletManager.TrackPod(ctx, p)
		}
	}
	clk.SetTime(latestBegin.Add(11 * time.Minute))
	for _, name := range []string{byKubelet.Name, byAgent.Name} {
		testenv.Eventually(t, "CertificateOverdueForRefresh on "+name, 60*time.Second, func() bool {
			poke()
			return warnings(t, ns, name, certificates.ReasonOverdueForRefresh) >= 1
		})
	}
	clk.SetTime(latestEnd.Add(time.Minute))
	for _, name := range []string{byKubelet.Name, byAgent.Name} {
		testenv.Eventually(t, "CertificateExpired on "+name, 60*time.Second, func() bool {
			poke()
			return warnings(t, ns, name, certificates.ReasonExpired) >= 1
		})
	}
	for range 10 { // more passes of both managers
		poke()
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // kubelet's broadcaster writes asynchronously
	for _, name := range []string{byKubelet.Name, byAgent.Name} {
		for _, reason := range []string{certificates.ReasonOverdueForRefresh, certificates.ReasonExpired} {
			if n := warnings(t, ns, name, reason); n != 1 {
				t.Errorf("%s on %s: %d events, want 1", reason, name, n)
			}
		}
	}
	if k, a := counts(); k != 2 || a != 2 {
		t.Errorf("PCRs after one refresh: kubelet's pod %d, agent's pod %d; want 2 each (first and refresh)", k, a)
	}
}

// TestKubeletWithTrustplaneSigner: kubelet's own manager gets a working credential from
// trustplane's signer for every key type the signer issues.
func TestKubeletWithTrustplaneSigner(t *testing.T) {
	ns := env.Namespace(t, "kubelet-signer")
	const node = "node-kubelet-signer"
	keyTypes := podcertsigner.DefaultOptions().KeyTypes
	sources := make([]corev1.VolumeProjection, 0, len(keyTypes))
	for _, kt := range keyTypes {
		src := certSource(signer, kt)
		src.PodCertificate.CredentialBundlePath = kt + ".pem"
		sources = append(sources, src)
	}
	pod := podWith(ns, "all-key-types", node, nil, sources...)
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, pod)
	trustplaneSigner(t, ns)
	m := kubelet(t, node, clock.RealClock{}, pod)
	for i, kt := range keyTypes {
		var leaf *x509.Certificate
		testenv.Eventually(t, "kubelet's "+kt+" credential", 120*time.Second, func() bool {
			roots := signerRoots(t, ns)
			if roots == nil {
				return false
			}
			var err error
			leaf, err = checkKubeletBundle(m, pod, i, roots)
			return err == nil
		})
		if got := podcertsigner.KeyTypeOf(leaf.PublicKey); got != kt {
			t.Errorf("source %d: key type %s, want %s", i, got, kt)
		}
	}
}

// TestAgentWithHermeticSigner: trustplane's node agent gets a working credential from
// Kubernetes' hermetic test signer (k8s.io/kubernetes/test/utils/hermeticpodcertificatesigner).
func TestAgentWithHermeticSigner(t *testing.T) {
	ns := env.Namespace(t, "hermetic")
	const node, hermetic = "node-hermetic", "example.com/hermetic"
	caKeys, caCerts, err := hermeticpodcertificatesigner.GenerateCAHierarchy(1)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(env.Config)
	c, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go hermeticpodcertificatesigner.New(clock.RealClock{}, hermetic, "cluster.local", caKeys, caCerts, kc).Run(c)

	optedIn := map[string]string{nodeagent.ServeAnnotation: nodeagent.ServeAgent}
	sources := []corev1.VolumeProjection{certSource(hermetic, "ECDSAP256"), certSource(hermetic, "ED25519")}
	sources[1].PodCertificate.CredentialBundlePath = "other.pem"
	pod := podWith(ns, "hermetic", node, optedIn, sources...)
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, pod)
	dir := t.TempDir()
	agent(t, node, dir, clock.RealClock{}, nil)

	roots := x509.NewCertPool()
	root, err := x509.ParseCertificate(caCerts[0])
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(root)
	for i, kt := range []string{"ECDSAP256", "ED25519"} {
		path := filepath.Join(dir, ns, pod.Name, "id-"+string(rune('0'+i)), nodeagent.BundleFile)
		var leaf *x509.Certificate
		testenv.Eventually(t, "the agent's "+kt+" credential from the hermetic signer", 60*time.Second, func() bool {
			raw, err := os.ReadFile(path)
			if err != nil {
				return false
			}
			leaf, err = checkWithIntermediates(raw, roots)
			if err != nil {
				t.Fatal(err)
			}
			return true
		})
		if got := podcertsigner.KeyTypeOf(leaf.PublicKey); got != kt {
			t.Errorf("%s: key type %s", path, got)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/"+ns+"/sa/web" {
			t.Errorf("%s: URIs %v", path, leaf.URIs)
		}
	}
}

// checkWithIntermediates checks a bundle whose chain carries intermediates after the leaf.
func checkWithIntermediates(raw []byte, roots *x509.CertPool) (*x509.Certificate, error) {
	keyBlock, rest := pem.Decode(raw)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		return nil, errNoKey
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for b, r := pem.Decode(rest); b != nil; b, r = pem.Decode(r) {
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errNoKey
	}
	if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(certs[0].PublicKey) {
		return nil, errNoKey
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err = certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return certs[0], err
}

var errNoKey = errorString("the bundle is not a private key followed by its certificate chain")

type errorString string

func (e errorString) Error() string { return string(e) }
