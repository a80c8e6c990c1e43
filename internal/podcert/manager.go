package podcert

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/api/certificates"
)

var errNotIssued = errors.New("credential bundle is not issued yet")

// TerminalError says a projection's request was denied or failed for good.
type TerminalError struct{ State, Reason, Message string }

func (e *TerminalError) Error() string {
	return fmt.Sprintf("PodCertificateRequest %s: reason=%q message=%q", e.State, e.Reason, e.Message)
}

// ServiceAccountNotFoundError says the pod's ServiceAccount does not exist: a request
// names it by UID, so none can be made until it does.
type ServiceAccountNotFoundError struct{ Namespace, Name string }

func (e *ServiceAccountNotFoundError) Error() string {
	return fmt.Sprintf("ServiceAccount %q not found in namespace %s", e.Name, e.Namespace)
}

// Key names one projection: a podCertificate source of a projected volume of a pod.
type Key struct {
	Namespace, PodName, PodUID, VolumeName string
	SourceIndex                            int
}

// API is what the manager needs from the cluster.
type API interface {
	// CreatePCR creates a PodCertificateRequest and returns it as stored.
	CreatePCR(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error)
	// GetPCR reads one from the informer cache; a NotFound error when absent.
	GetPCR(namespace, name string) (*certificatesv1.PodCertificateRequest, error)
	// ServiceAccountUID and NodeUID identify the requester.
	ServiceAccountUID(ctx context.Context, namespace, name string) (types.UID, error)
	NodeUID(ctx context.Context) (types.UID, error)
}

// Recorder records events: client-go's events.EventRecorder, which this package names
// by its one method so that it needs no Kubernetes client.
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Manager holds the credential state of every projection on one node.
type Manager struct {
	api      API
	recorder Recorder
	clock    clock.PassiveClock
	nodeName types.NodeName
	// jitter returns a random delay in [0, maxJitter); tests make it deterministic.
	jitter func() time.Duration

	mu    sync.Mutex
	store map[Key]*record
	// answered are the signers that have concluded a request of this manager (issued,
	// denied or failed): a request pending for another signer may be waiting for nobody.
	answered map[string]bool
}

type record struct {
	mu    sync.Mutex
	state state
	// source is the projection the state was made for: a projection from pod annotations
	// can change under a running pod, and a changed one starts again from Initial.
	source *corev1.PodCertificateProjection
}

// NewManager returns a manager for nodeName.
func NewManager(api API, recorder Recorder, c clock.PassiveClock, nodeName types.NodeName) *Manager {
	return &Manager{api: api, recorder: recorder, clock: c, nodeName: nodeName,
		// Jitter spreads requests over time; it need not be unpredictable.
		jitter: func() time.Duration { return time.Duration(mathrand.Int64N(int64(maxJitter))) }, //nolint:gosec // not a secret
		store:  map[Key]*record{}, answered: map[string]bool{}}
}

// SetJitter replaces the random jitter (tests).
func (m *Manager) SetJitter(j func() time.Duration) { m.jitter = j }

// Projections lists the podCertificate sources of a pod.
func Projections(pod *corev1.Pod) map[Key]*corev1.PodCertificateProjection {
	out := map[Key]*corev1.PodCertificateProjection{}
	for _, vol := range pod.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for i, src := range vol.Projected.Sources {
			if src.PodCertificate != nil {
				out[Key{Namespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID), VolumeName: vol.Name, SourceIndex: i}] = src.PodCertificate
			}
		}
	}
	return out
}

// Handle advances one projection of pod by one step of the state machine (upstream's
// handleProjection). A returned error asks for a rate-limited retry.
func (m *Manager) Handle(ctx context.Context, pod *corev1.Pod, key Key) error {
	source := Projections(pod)[key]
	if source == nil {
		return nil // nothing a retry could fix
	}
	rec := m.record(key)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	now := m.clock.Now()
	if rec.source != nil && !apiequality.Semantic.DeepEqual(rec.source, source) {
		rec.state = stateInitial{} // a request for another signer or key type than asked now
	}
	rec.source = source.DeepCopy()

	switch st := rec.state.(type) {
	case stateInitial:
		key, pcr, err := m.request(ctx, pod, source)
		if err != nil {
			return fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		rec.state = &stateWait{privateKey: key, pcrName: pcr.Name, pcrAbandonAt: pcr.CreationTimestamp.Add(assumeDeletedThreshold + m.jitter())}
		return nil

	case *stateWait:
		pcr, err := m.api.GetPCR(pod.Namespace, st.pcrName)
		if apierrors.IsNotFound(err) && now.After(st.pcrAbandonAt) {
			rec.state = stateInitial{}
			return fmt.Errorf("PodCertificateRequest %q appears to have been deleted", pod.Namespace+"/"+st.pcrName)
		} else if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+st.pcrName, err)
		}
		if next := m.terminal(pod, pcr, st.privateKey); next != nil {
			rec.state = next
			return nil
		}
		m.reportUnanswered(ctx, pod, pcr, st, now)
		return nil

	case *stateDenied, *stateFailed:
		return nil

	case *stateFresh:
		if now.Before(st.beginRefreshAt) {
			return nil
		}
		m.warn(pod, &st.issued, now)
		key, pcr, err := m.request(ctx, pod, source)
		if err != nil {
			return fmt.Errorf("while creating refresh PodCertificateRequest: %w", err)
		}
		rec.state = &stateWaitRefresh{issued: st.issued, refreshPrivateKey: key, refreshPCRName: pcr.Name,
			refreshPCRAbandonAt: pcr.CreationTimestamp.Add(assumeDeletedThreshold + m.jitter())}
		return nil

	case *stateWaitRefresh:
		pcr, err := m.api.GetPCR(pod.Namespace, st.refreshPCRName)
		if apierrors.IsNotFound(err) && now.After(st.refreshPCRAbandonAt) {
			rec.state = &stateFresh{issued: st.issued}
			return errors.New("PodCertificateRequest appears to have been deleted")
		} else if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+st.refreshPCRName, err)
		}
		if next := m.terminal(pod, pcr, st.refreshPrivateKey); next != nil {
			rec.state = next
			return nil
		}
		m.warn(pod, &st.issued, now)
		return nil
	}
	return nil
}

// terminal is the state a finished PCR leads to (nil while it is pending); Denied and
// Failed send a Warning event.
func (m *Manager) terminal(pod *corev1.Pod, pcr *certificatesv1.PodCertificateRequest, privateKey []byte) state {
	if len(pcr.Status.Conditions) > 0 {
		m.mu.Lock()
		m.answered[pcr.Spec.SignerName] = true
		m.mu.Unlock()
	}
	for _, cond := range pcr.Status.Conditions {
		name := pcr.Namespace + "/" + pcr.Name
		switch cond.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificatesv1.PodCertificateRequestConditionTypeDenied, cond.Reason,
				"PodCertificateRequest %s was denied, reason=%q, message=%q", name, cond.Reason, cond.Message)
			return &stateDenied{reason: cond.Reason, message: cond.Message}
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificatesv1.PodCertificateRequestConditionTypeFailed, cond.Reason,
				"PodCertificateRequest %s failed, reason=%q, message=%q", name, cond.Reason, cond.Message)
			return &stateFailed{reason: cond.Reason, message: cond.Message}
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			return &stateFresh{issued: issued{
				privateKey:     privateKey,
				certChain:      cleanChain([]byte(pcr.Status.CertificateChain)),
				beginRefreshAt: pcr.Status.BeginRefreshAt.Add(m.jitter()),
				notAfter:       pcr.Status.NotAfter.Time,
			}}
		}
	}
	return nil
}

// warn emits, each at most once per certificate, the overdue-for-refresh and expired events.
func (m *Manager) warn(pod *corev1.Pod, st *issued, now time.Time) {
	if now.After(st.beginRefreshAt.Add(refreshOverdueDuration)) && !st.eventEmittedForOverdueForRefresh {
		m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonOverdueForRefresh, "Refresh", MessageOverdueForRefresh)
		st.eventEmittedForOverdueForRefresh = true
	}
	if now.After(st.notAfter) && !st.eventEmittedForExpiration {
		m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonExpired, "Refresh", MessageExpired)
		st.eventEmittedForExpiration = true
	}
}

// request generates a key and its proof of possession and creates the PCR.
func (m *Manager) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection) ([]byte, *certificatesv1.PodCertificateRequest, error) {
	saUID, err := m.api.ServiceAccountUID(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		return nil, nil, &ServiceAccountNotFoundError{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("while fetching service account: %w", err)
	}
	nodeUID, err := m.api.NodeUID(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("while getting node: %w", err)
	}
	priv, proof, err := GenerateKeyAndProof(src.KeyType)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pcr, err := m.api.CreatePCR(ctx, &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: saUID,
			NodeName: m.nodeName, NodeUID: nodeUID,
			MaxExpirationSeconds: src.MaxExpirationSeconds, StubPKCS10Request: proof,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("while creating on API: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pcr, nil
}

// GenerateKeyAndProof makes a key of a PodCertificateProjection key type and a stub
// PKCS#10 request signed by it: the proof of possession.
func GenerateKeyAndProof(keyType string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("while generating %s key: %w", keyType, err)
	}
	proof, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return key, proof, nil
}

// cleanChain re-encodes every PEM block as a plain CERTIFICATE block (no headers).
func cleanChain(in []byte) []byte {
	var out bytes.Buffer
	for rest := in; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out.Bytes()
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
	}
}

func (m *Manager) record(key Key) *record {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.store[key]
	if rec == nil {
		rec = &record{state: stateInitial{}}
		m.store[key] = rec
	}
	return rec
}

// Bundle is a projection's credential: the PKCS#8 key and the chain, leaf first.
func (m *Manager) Bundle(key Key) (privateKey, chain []byte, err error) {
	m.mu.Lock()
	rec := m.store[key]
	m.mu.Unlock()
	if rec == nil {
		return nil, nil, fmt.Errorf("no credentials yet for %v", key)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.state.bundle()
}

// Forget drops every projection of a pod (the pod went away).
func (m *Manager) Forget(namespace, podName, podUID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.store {
		if k.Namespace == namespace && k.PodName == podName && k.PodUID == podUID {
			delete(m.store, k)
		}
	}
}

// SignerAndState is a metrics key.
type SignerAndState struct{ SignerName, State string }

// Report counts the projections of pods by signer and state at the manager's now.
func (m *Manager) Report(pods []*corev1.Pod) map[SignerAndState]int {
	out := map[SignerAndState]int{}
	now := m.clock.Now()
	for _, pod := range pods {
		for key, src := range Projections(pod) {
			m.mu.Lock()
			rec := m.store[key]
			m.mu.Unlock()
			if rec == nil {
				continue
			}
			rec.mu.Lock()
			out[SignerAndState{SignerName: src.SignerName, State: rec.state.metricsState(now)}]++
			rec.mu.Unlock()
		}
	}
	return out
}
