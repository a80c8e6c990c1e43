package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/internal/version"
)

// A pod certificate's life on a real kubelet is paced by the API's floors, which no
// option shortens: kube-apiserver refuses an issued status whose lifetime is under 1h,
// whose notBefore is more than 5 minutes from its clock, or whose beginRefreshAt is less
// than 10 minutes after notBefore (pkg/apis/certificates/validation); the kubelet adds
// up to 5 minutes of jitter to beginRefreshAt and looks at each projection once every 1–2
// minutes (pkg/kubelet/podcertificate). The signers here backdate by the most they may
// (4m) and refresh at the earliest, so a certificate is refreshed 6–13 minutes after it
// was signed, overdue 16–23 minutes after, and expired 56–58 minutes after.
const (
	// lifecycleSigner is the signer that is stopped after its first certificate: a
	// `trustplane manager` running only the pod-certificate signer, as a process here.
	lifecycleSigner = "test.trustplane.io/stopped"
	// refreshWithin, overdueWithin and expiredWithin bound the waits, from the signing.
	refreshWithin = 20 * time.Minute
	overdueWithin = 26 * time.Minute
	expiredWithin = 62 * time.Minute
	// podCertLifetime is the lifetime the pods ask for: the API's minimum.
	podCertLifetime = 3600
)

// signerEarliestRefresh are the signer's options (chart config and flags alike) for the
// earliest refresh kube-apiserver accepts.
var signerEarliestRefresh = map[string]string{"refreshFraction": "0.01", "backdate": "4m"}

// waitForExpiry says whether the suite also waits for CertificateExpired (about an hour):
// `make test-node-expiry` sets it; make test stops at CertificateOverdueForRefresh.
func waitForExpiry() bool { return os.Getenv("TRUSTPLANE_NODE_EXPIRY") != "" }

// podCertLifecycle follows two pods' certificates while the kubelet's own PodCertificate
// manager refreshes them: "refreshed", signed by the chart's signer, which keeps
// running; "stranded", signed by a signer that is stopped after its first certificate.
type podCertLifecycle struct {
	ns string
	// firstRefreshed is the refreshed pod's first certificate, as its nginx served it.
	firstRefreshed *x509.Certificate
	// strandedIssued is the stranded pod's one issued request.
	strandedIssued *certificatesv1.PodCertificateRequest
}

// startPodCertLifecycle creates both pods and waits for their first certificates, then
// stops the stranded pod's signer.
func startPodCertLifecycle(t *testing.T) *podCertLifecycle {
	lc := &podCertLifecycle{ns: namespace(t, "podcert-lifecycle")}
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: lc.ns, Name: "web"}})
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: lc.ns, Name: "serve-chain"}, Data: map[string]string{
		// The certificate chain as the container sees it, read anew on every request.
		"chain.conf": "server {\n  listen 8080;\n  location = /chain.pem {\n    root /var/run/identity;\n    default_type text/plain;\n  }\n}\n",
	}})

	signer := testenv.StartProcess(t, testenv.Binary(t), "manager", "--kubeconfig", kubeconfig,
		"--controllers", "podcertificate-signer", "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--jwks-server-bind-address", "0",
		"--podcertificate-signer-signer-name", lifecycleSigner, "--podcertificate-signer-ca-namespace", lc.ns, "--podcertificate-signer-ca-secret", "stopped-ca",
		"--podcertificate-signer-refresh-fraction", signerEarliestRefresh["refreshFraction"], "--podcertificate-signer-backdate", signerEarliestRefresh["backdate"])
	create(t, chainServingPod(lc.ns, "refreshed", podIdentity))
	create(t, chainServingPod(lc.ns, "stranded", lifecycleSigner))
	lc.firstRefreshed = servedLeaf(t, lc.ns, "refreshed")
	lc.strandedIssued = onlyIssued(t, lc.ns, "stranded")
	servedLeaf(t, lc.ns, "stranded")
	if _, err := signer.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the signer: %v", err)
	}
	t.Logf("signed: refreshed pod's certificate at %s, the stranded pod's at %s (beginRefreshAt %s, notAfter %s); its signer stopped",
		lc.firstRefreshed.NotBefore.Format(time.TimeOnly), lc.strandedIssued.Status.NotBefore.Format(time.TimeOnly),
		lc.strandedIssued.Status.BeginRefreshAt.Format(time.TimeOnly), lc.strandedIssued.Status.NotAfter.Format(time.TimeOnly))
	return lc
}

// testRefresh: after beginRefreshAt the kubelet asks the chart's signer for a new
// certificate, and the container sees it in the same mount, without a restart.
func (lc *podCertLifecycle) testRefresh(t *testing.T) {
	first := requestsOf(t, lc.ns, "refreshed")
	if len(first) == 0 || first[0].Status.BeginRefreshAt == nil {
		t.Fatalf("the refreshed pod's first request: %+v", first)
	}
	beginRefreshAt := first[0].Status.BeginRefreshAt.Time
	var refreshed *x509.Certificate
	poll(t, "the container to see a refreshed certificate", lc.firstRefreshed.NotBefore.Add(refreshWithin), func() bool {
		refreshed = fetchLeaf(lc.ns, "refreshed")
		return refreshed != nil && !refreshed.Equal(lc.firstRefreshed)
	})
	if _, err := refreshed.Verify(x509.VerifyOptions{Roots: trustBundle(t, podIdentity), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("the refreshed certificate does not verify against the ClusterTrustBundle: %v", err)
	}
	if want := fmt.Sprintf("spiffe://cluster.local/ns/%s/sa/web", lc.ns); len(refreshed.URIs) != 1 || refreshed.URIs[0].String() != want {
		t.Errorf("refreshed certificate's URI SANs %v, want [%s]", refreshed.URIs, want)
	}
	requests := requestsOf(t, lc.ns, "refreshed")
	if len(requests) < 2 {
		t.Fatalf("the refreshed pod has %d PodCertificateRequests, want its first and the refresh", len(requests))
	}
	// The kubelet refreshed no earlier than the signer said (PCR times are in seconds).
	if created := requests[1].CreationTimestamp.Time; created.Before(beginRefreshAt.Truncate(time.Second)) {
		t.Errorf("the kubelet asked again at %s, before beginRefreshAt %s", created, beginRefreshAt)
	}
	t.Logf("beginRefreshAt %s; the kubelet asked again at %s; the container saw the new certificate by %s",
		beginRefreshAt.Format(time.TimeOnly), requests[1].CreationTimestamp.Format(time.TimeOnly), time.Now().Format(time.TimeOnly))
	pod := &corev1.Pod{}
	get(t, lc.ns, "refreshed", pod)
	if restarts := pod.Status.ContainerStatuses[0].RestartCount; restarts != 0 {
		t.Errorf("the container restarted %d times for the refresh", restarts)
	}
}

// testStopped: with its signer stopped, the kubelet asks for a refresh that no one
// answers, warns CertificateOverdueForRefresh 10 minutes past beginRefreshAt and, when
// TRUSTPLANE_NODE_EXPIRY is set, CertificateExpired past notAfter; meanwhile the pod
// keeps the certificate it has.
func (lc *podCertLifecycle) testStopped(t *testing.T) {
	issued := lc.strandedIssued.Status
	poll(t, "the kubelet's CertificateOverdueForRefresh on the stranded pod", issued.NotBefore.Add(overdueWithin), func() bool {
		return kubeletWarned(t, lc.ns, "stranded", certificates.ReasonOverdueForRefresh)
	})
	requests := requestsOf(t, lc.ns, "stranded")
	if len(requests) != 2 || len(requests[1].Status.Conditions) != 0 || requests[1].CreationTimestamp.Time.Before(issued.BeginRefreshAt.Time) {
		t.Errorf("want the issued request and one unanswered refresh asked after beginRefreshAt %s; have %s", issued.BeginRefreshAt, describeRequests(requests))
	}
	if leaf := fetchLeaf(lc.ns, "stranded"); leaf == nil || leaf.NotAfter.Before(issued.NotAfter.Truncate(time.Second)) {
		t.Errorf("the stranded pod no longer serves its certificate: %v", leaf)
	}
	if !waitForExpiry() {
		t.Logf("CertificateExpired comes at notAfter %s; make test-node-expiry waits for it", issued.NotAfter.Format(time.TimeOnly))
		return
	}
	poll(t, "the kubelet's CertificateExpired on the stranded pod", issued.NotBefore.Add(expiredWithin), func() bool {
		return kubeletWarned(t, lc.ns, "stranded", certificates.ReasonExpired)
	})
	if time.Now().Before(issued.NotAfter.Time) {
		t.Errorf("CertificateExpired before notAfter %s", issued.NotAfter)
	}
}

// chainServingPod is a pod with a podCertificate volume of signer whose nginx serves the
// certificate chain it sees at :8080/chain.pem.
func chainServingPod(ns, name, signer string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "nginx", Image: version.Image("jwks-nginx"),
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/chain.pem", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 2},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "identity", MountPath: "/var/run/identity", ReadOnly: true},
					{Name: "conf", MountPath: "/etc/nginx/conf.d", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
						SignerName: signer, KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To[int32](podCertLifetime),
						CertificateChainPath: "chain.pem", KeyPath: "key.pem",
					}}},
				}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "serve-chain"}}}},
			},
		},
	}
}

// servedLeaf waits for pod ns/name's nginx to serve its certificate and returns it.
func servedLeaf(t *testing.T, ns, name string) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	waitForPods(t, "pod "+ns+"/"+name+" to serve its certificate", 3*time.Minute, ns, nil, func() bool {
		leaf = fetchLeaf(ns, name)
		return leaf != nil
	})
	return leaf
}

// fetchLeaf is the first certificate of the chain pod ns/name serves, nil if it serves
// none (yet).
func fetchLeaf(ns, name string) *x509.Certificate {
	pod := &corev1.Pod{}
	if c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod) != nil || pod.Status.PodIP == "" {
		return nil
	}
	block, _ := pem.Decode([]byte(httpGet("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/chain.pem")))
	if block == nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return leaf
}

// onlyIssued waits for pod ns/name's first request to be issued and returns it.
func onlyIssued(t *testing.T, ns, name string) *certificatesv1.PodCertificateRequest {
	t.Helper()
	var issued *certificatesv1.PodCertificateRequest
	waitFor(t, "the first request of "+ns+"/"+name+" to be issued", 2*time.Minute, func() bool {
		requests := requestsOf(t, ns, name)
		if len(requests) == 0 {
			return false
		}
		for _, cond := range requests[0].Status.Conditions {
			if cond.Type == certificatesv1.PodCertificateRequestConditionTypeIssued {
				issued = &requests[0]
				return true
			}
		}
		return false
	})
	return issued
}

// requestsOf are pod ns/name's PodCertificateRequests, oldest first.
func requestsOf(t *testing.T, ns, name string) []certificatesv1.PodCertificateRequest {
	t.Helper()
	requests := testenv.PodCertificateRequestsOf(t, c, ns, name)
	slices.SortStableFunc(requests, func(a, b certificatesv1.PodCertificateRequest) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return requests
}

func describeRequests(requests []certificatesv1.PodCertificateRequest) string {
	var parts []string
	for _, r := range requests {
		var conds []string
		for _, cond := range r.Status.Conditions {
			conds = append(conds, cond.Type)
		}
		parts = append(parts, fmt.Sprintf("%s (created %s, conditions %v)", r.Name, r.CreationTimestamp.Format(time.TimeOnly), conds))
	}
	return strings.Join(parts, ", ")
}

// kubeletWarned says whether the kubelet recorded a Warning event of reason on pod ns/name.
func kubeletWarned(t *testing.T, ns, name, reason string) bool {
	t.Helper()
	events := &corev1.EventList{}
	if err := c.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		return false
	}
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == "Pod" && ev.InvolvedObject.Name == name && ev.Reason == reason &&
			ev.Type == corev1.EventTypeWarning && ev.Source.Component == "kubelet" {
			return true
		}
	}
	return false
}

// trustBundle is the pool of the ClusterTrustBundles of signer.
func trustBundle(t *testing.T, signer string) *x509.CertPool {
	t.Helper()
	roots := x509.NewCertPool()
	bundles := &certificatesv1.ClusterTrustBundleList{}
	if err := c.List(context.Background(), bundles); err != nil {
		t.Fatal(err)
	}
	for _, b := range bundles.Items {
		if b.Spec.SignerName == signer {
			roots.AppendCertsFromPEM([]byte(b.Spec.TrustBundle))
		}
	}
	return roots
}

// poll checks cond every 5 seconds until deadline, for waits counted in minutes.
func poll(t *testing.T, what string, deadline time.Time, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by %s (waited %s)", what, deadline.Format(time.TimeOnly), time.Since(start).Round(time.Second))
		}
		time.Sleep(5 * time.Second)
	}
	t.Logf("%s: after %s", what, time.Since(start).Round(time.Second))
}
