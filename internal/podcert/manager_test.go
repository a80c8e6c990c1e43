package podcert

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// fakeAPI is an in-memory stand-in for the API server's PCR storage (pure-logic tests;
// the signer and node-agent tests use the real API server).
type fakeAPI struct {
	clock   *clocktesting.FakeClock
	pcrs    map[string]*certificatesv1.PodCertificateRequest
	created int
}

func (f *fakeAPI) CreatePCR(_ context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	f.created++
	pcr = pcr.DeepCopy()
	pcr.Name = fmt.Sprintf("%s%d", pcr.GenerateName, f.created)
	pcr.CreationTimestamp = metav1.NewTime(f.clock.Now())
	f.pcrs[pcr.Name] = pcr
	return pcr, nil
}

func (f *fakeAPI) GetPCR(_, name string) (*certificatesv1.PodCertificateRequest, error) {
	if p, ok := f.pcrs[name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

func (f *fakeAPI) ServiceAccountUID(context.Context, string, string) (types.UID, error) {
	return "sa-uid", nil
}
func (f *fakeAPI) NodeUID(context.Context) (types.UID, error) { return "node-uid", nil }

type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	api    *fakeAPI
	events *events.FakeRecorder
	m      *Manager
	pod    *corev1.Pod
	key    Key
	seen   map[string]int
}

func newHarness(t *testing.T, keyType string) *harness {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	h := &harness{t: t, clock: clk, api: &fakeAPI{clock: clk, pcrs: map[string]*certificatesv1.PodCertificateRequest{}},
		events: events.NewFakeRecorder(100), seen: map[string]int{}}
	h.m = NewManager(h.api, h.events, clk, "node-1")
	h.m.SetJitter(func() time.Duration { return 0 })
	h.pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"},
		Spec: corev1.PodSpec{ServiceAccountName: "web-sa", Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: keyType, MaxExpirationSeconds: ptrInt32(86400)}},
			}}}}}},
	}
	h.key = Key{Namespace: "ns", PodName: "web", PodUID: "pod-uid", VolumeName: "creds", SourceIndex: 1}
	return h
}

func ptrInt32(v int32) *int32 { return &v }

func (h *harness) handle() error { return h.m.Handle(context.Background(), h.pod, h.key) }

func (h *harness) mustHandle() {
	h.t.Helper()
	if err := h.handle(); err != nil {
		h.t.Fatal(err)
	}
}

// drain counts the events emitted so far by reason.
func (h *harness) drain() map[string]int {
	for {
		select {
		case e := <-h.events.Events:
			h.seen[strings.Fields(e)[1]]++
		default:
			return h.seen
		}
	}
}

func (h *harness) metricsState() string {
	for k := range h.m.Report([]*corev1.Pod{h.pod}) {
		return k.State
	}
	return ""
}

// latest is the newest PCR.
func (h *harness) latest() *certificatesv1.PodCertificateRequest {
	return h.api.pcrs[fmt.Sprintf("req-%d", h.api.created)]
}

// issue marks the newest PCR issued, valid for lifetime, refresh at half of it.
func (h *harness) issue(lifetime time.Duration) {
	h.t.Helper()
	pcr := h.latest()
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		h.t.Fatal(err)
	}
	caKey, _ := testcerts.NewKey(testcerts.P256)
	ca, err := testcerts.NewChain(caKey, "ca", h.clock.Now(), h.clock.Now().Add(lifetime))
	if err != nil {
		h.t.Fatal(err)
	}
	leaf, err := testcerts.Issue(ca.CA, ca.CAKey, csr.PublicKey, "web", h.clock.Now(), h.clock.Now().Add(lifetime))
	if err != nil {
		h.t.Fatal(err)
	}
	// A header on a block, as a sloppy signer might send: the manager must clean it.
	chain := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"x": "y"}, Bytes: leaf.Raw}))
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}},
		CertificateChain: chain,
		NotBefore:        ptrTime(h.clock.Now()), BeginRefreshAt: ptrTime(h.clock.Now().Add(lifetime / 2)), NotAfter: ptrTime(h.clock.Now().Add(lifetime)),
	}
}

func ptrTime(t time.Time) *metav1.Time { v := metav1.NewTime(t); return &v }

func (h *harness) conclude(condType, reason string) {
	h.latest().Status.Conditions = []metav1.Condition{{Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: "no"}}
}

func TestEveryKeyTypeRequestsWithAValidProofOfPossession(t *testing.T) {
	for _, kt := range []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"} {
		t.Run(kt, func(t *testing.T) {
			h := newHarness(t, kt)
			h.mustHandle()
			pcr := h.latest()
			if pcr == nil || pcr.GenerateName != "req-" || pcr.OwnerReferences[0].UID != "pod-uid" || pcr.Spec.NodeName != "node-1" ||
				pcr.Spec.ServiceAccountUID != "sa-uid" || pcr.Spec.NodeUID != "node-uid" || *pcr.Spec.MaxExpirationSeconds != 86400 {
				t.Fatalf("request: %+v", pcr)
			}
			csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
			if err != nil || csr.CheckSignature() != nil {
				t.Fatalf("proof of possession: %v", err)
			}
			if h.metricsState() != StateNotYetIssued {
				t.Errorf("state %s", h.metricsState())
			}
			h.issue(24 * time.Hour)
			h.mustHandle()
			key, chain, err := h.m.Bundle(h.key)
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(key)
			priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil || block.Type != "PRIVATE KEY" {
				t.Fatalf("key: %v", err)
			}
			leafBlock, _ := pem.Decode(chain)
			leaf, _ := x509.ParseCertificate(leafBlock.Bytes)
			if len(leafBlock.Headers) != 0 || !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
				t.Error("the bundle's key and certificate do not belong together, or the chain was not cleaned")
			}
		})
	}
	if _, _, err := GenerateKeyAndProof("DSA"); err == nil {
		t.Error("unknown key type accepted")
	}
}

// TestFreshPathEvents: the refresh never succeeds; time passes in the Fresh state first.
func TestFreshPathEvents(t *testing.T) {
	h := newHarness(t, "ECDSAP256")
	h.mustHandle()
	h.issue(2 * time.Hour) // beginRefreshAt +1h, notAfter +2h
	h.mustHandle()
	if h.metricsState() != StateFresh {
		t.Fatalf("state %s", h.metricsState())
	}
	h.clock.Step(59 * time.Minute)
	h.mustHandle()
	if h.api.created != 1 {
		t.Fatal("refreshed before beginRefreshAt")
	}
	// Jump straight past notAfter while still Fresh: both warnings, once, then a refresh PCR.
	h.clock.Step(2 * time.Hour)
	if h.metricsState() != StateExpired {
		t.Errorf("metrics state %s, want expired", h.metricsState())
	}
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 1 || got[certificates.ReasonExpired] != 1 {
		t.Fatalf("events %v", got)
	}
	if h.api.created != 2 {
		t.Fatal("no refresh request")
	}
	// WaitRefresh carries the flags: still pending, nothing more is emitted.
	for range 3 {
		h.clock.Step(time.Minute)
		h.mustHandle()
	}
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 1 || got[certificates.ReasonExpired] != 1 {
		t.Fatalf("events repeated: %v", got)
	}
	// Expired credentials are still served.
	if key, chain, err := h.m.Bundle(h.key); err != nil || key == nil || chain == nil {
		t.Errorf("expired bundle not served: %v", err)
	}
}

// TestWaitRefreshPathEvents: the refresh starts on time, then the signer stalls.
func TestWaitRefreshPathEvents(t *testing.T) {
	h := newHarness(t, "ED25519")
	h.mustHandle()
	h.issue(2 * time.Hour)
	h.mustHandle()
	h.clock.Step(time.Hour) // at beginRefreshAt: refresh request, no warning
	h.mustHandle()
	if h.api.created != 2 || len(h.drain()) != 0 {
		t.Fatalf("refresh: created %d, events %v", h.api.created, h.seen)
	}
	h.clock.Step(5 * time.Minute)
	h.mustHandle()
	if h.drain()[certificates.ReasonOverdueForRefresh] != 0 || h.metricsState() != StateFresh {
		t.Fatal("overdue too early")
	}
	h.clock.Step(6 * time.Minute) // > 10 min past beginRefreshAt
	h.mustHandle()
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 1 || got[certificates.ReasonExpired] != 0 || h.metricsState() != StateOverdueForRefresh {
		t.Fatalf("overdue: %v, state %s", got, h.metricsState())
	}
	h.clock.Step(time.Hour) // past notAfter
	h.mustHandle()
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 1 || got[certificates.ReasonExpired] != 1 {
		t.Fatalf("expired: %v", got)
	}

	// The signer comes back: a new certificate resets both flags...
	h.issue(2 * time.Hour)
	h.mustHandle()
	if h.metricsState() != StateFresh {
		t.Fatalf("after reissue: %s", h.metricsState())
	}
	// ...so the new certificate gets its own warnings, once each.
	h.clock.Step(3 * time.Hour)
	h.mustHandle()
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 2 || got[certificates.ReasonExpired] != 2 {
		t.Fatalf("second certificate: %v", got)
	}
}

func TestDeniedAndFailedAreTerminalWithoutExpiryEvents(t *testing.T) {
	for cond, metric := range map[string]string{certificatesv1.PodCertificateRequestConditionTypeDenied: StateDenied, certificatesv1.PodCertificateRequestConditionTypeFailed: StateFailed} {
		h := newHarness(t, "ECDSAP256")
		h.mustHandle()
		h.conclude(cond, "Nope")
		h.mustHandle()
		if got := h.drain(); got[cond] != 1 {
			t.Errorf("%s: events %v", cond, got)
		}
		h.clock.Step(100 * time.Hour)
		for range 3 {
			h.mustHandle()
		}
		got := h.drain()
		if got[certificates.ReasonOverdueForRefresh]+got[certificates.ReasonExpired] != 0 || h.api.created != 1 || h.metricsState() != metric {
			t.Errorf("%s: events %v, created %d, state %s", cond, got, h.api.created, h.metricsState())
		}
		var te *TerminalError
		if _, _, err := h.m.Bundle(h.key); !errors.As(err, &te) || te.Reason != "Nope" {
			t.Errorf("%s: bundle error %v", cond, err)
		}
	}
	// A denied refresh is terminal too.
	h := newHarness(t, "ECDSAP256")
	h.mustHandle()
	h.issue(2 * time.Hour)
	h.mustHandle()
	h.clock.Step(time.Hour)
	h.mustHandle()
	h.conclude(certificatesv1.PodCertificateRequestConditionTypeDenied, "Revoked")
	h.mustHandle()
	if h.metricsState() != StateDenied {
		t.Errorf("denied refresh: %s", h.metricsState())
	}
}

func TestNoEventsBeforeIssuanceAndAbandonedRequests(t *testing.T) {
	h := newHarness(t, "ECDSAP384")
	h.mustHandle()
	first := h.latest().Name
	h.clock.Step(48 * time.Hour) // pending for ages: no expiry warning (only the unknown signer's)
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh]+got[certificates.ReasonExpired] != 0 {
		t.Fatalf("events while waiting: %v", got)
	}
	// Deleted before the abandon time: keep waiting (informer lag), retry with an error.
	h = newHarness(t, "ECDSAP384")
	h.mustHandle()
	delete(h.api.pcrs, h.latest().Name)
	if err := h.handle(); err == nil || h.metricsState() != StateNotYetIssued {
		t.Fatalf("missing before abandon: %v", err)
	}
	// Past it: back to Initial, which requests again.
	h.clock.Step(assumeDeletedThreshold + time.Second)
	if err := h.handle(); err == nil {
		t.Fatal("abandon must return an error so the projection is retried")
	}
	h.mustHandle()
	if h.api.created != 2 || h.latest().Name == first {
		t.Errorf("not re-requested: %d", h.api.created)
	}
	// The same for a refresh request: back to Fresh (flags kept), then a new refresh.
	h.issue(2 * time.Hour)
	h.mustHandle()
	h.clock.Step(time.Hour + 11*time.Minute)
	h.mustHandle() // overdue event, refresh request
	delete(h.api.pcrs, h.latest().Name)
	h.clock.Step(assumeDeletedThreshold + time.Second)
	if err := h.handle(); err == nil {
		t.Fatal("abandoned refresh must return an error")
	}
	h.mustHandle() // Fresh → new refresh request, no second overdue event
	if got := h.drain(); got[certificates.ReasonOverdueForRefresh] != 1 || h.api.created != 4 {
		t.Errorf("after an abandoned refresh: events %v, created %d", got, h.api.created)
	}
}

func TestForgetAndMetrics(t *testing.T) {
	h := newHarness(t, "ECDSAP256")
	h.mustHandle()
	if r := h.m.Report([]*corev1.Pod{h.pod}); r[SignerAndState{"example.com/signer", StateNotYetIssued}] != 1 {
		t.Errorf("report %v", r)
	}
	h.m.Forget("ns", "web", "pod-uid")
	if r := h.m.Report([]*corev1.Pod{h.pod}); len(r) != 0 {
		t.Errorf("after Forget: %v", r)
	}
	if _, _, err := h.m.Bundle(h.key); err == nil {
		t.Error("forgotten projection still has a bundle")
	}
}
