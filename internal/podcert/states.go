// Package podcert is kubelet's PodCertificate manager (pkg/kubelet/podcertificate) as a
// library: for each podCertificate projection of a pod it requests a certificate with a
// PodCertificateRequest, keeps the key and chain, refreshes at beginRefreshAt, and warns
// once per certificate when a refresh is overdue (CertificateOverdueForRefresh) and when
// it expired (CertificateExpired). The cluster is reached through the API interface and
// time through an injected clock, so every transition is testable.
package podcert

import "time"

// Upstream's constants.
const (
	// assumeDeletedThreshold: a PCR not seen this long after its creation is presumed deleted.
	assumeDeletedThreshold = 10 * time.Minute
	// refreshOverdueDuration: past beginRefreshAt by this much, a refresh is overdue.
	refreshOverdueDuration = 10 * time.Minute
	// maxJitter spreads PCR creations and refreshes of many projections.
	maxJitter = 5 * time.Minute
)

// Metric states, as kubelet reports them.
const (
	StateNotYetIssued      = "not_yet_issued"
	StateFresh             = "fresh"
	StateOverdueForRefresh = "overdue_for_refresh"
	StateExpired           = "expired"
	StateDenied            = "denied"
	StateFailed            = "failed"
)

// Event messages, as kubelet emits them (the reasons are api/certificates').
const (
	MessageOverdueForRefresh = "PodCertificate refresh overdue"
	MessageExpired           = "PodCertificate expired"
)

// state is one of the six credential states of a projection.
type state interface {
	// bundle is what the projection serves: key and chain, or why there is none.
	bundle() (key, chain []byte, err error)
	// metricsState is the state reported in metrics at now.
	metricsState(now time.Time) string
}

// stateInitial: no request made yet.
type stateInitial struct{}

// stateWait: the first request is pending.
type stateWait struct {
	privateKey   []byte
	pcrName      string
	pcrAbandonAt time.Time
	// eventEmittedForUnknownSigner: the request's signer was reported as one that has
	// answered nothing here (trustplane's addition; kubelet says nothing while it waits).
	eventEmittedForUnknownSigner bool
}

// stateDenied and stateFailed are permanent for the projection.
type stateDenied struct{ reason, message string }

type stateFailed struct{ reason, message string }

// issued is what Fresh and WaitRefresh share: the served credential and its timers.
type issued struct {
	privateKey                       []byte
	certChain                        []byte
	beginRefreshAt                   time.Time
	notAfter                         time.Time
	eventEmittedForOverdueForRefresh bool
	eventEmittedForExpiration        bool
}

// stateFresh: a certificate is served; nothing to do before beginRefreshAt.
type stateFresh struct{ issued }

// stateWaitRefresh: a certificate is served while the refresh request is pending.
type stateWaitRefresh struct {
	issued
	refreshPrivateKey   []byte
	refreshPCRName      string
	refreshPCRAbandonAt time.Time
}

func (stateInitial) bundle() ([]byte, []byte, error) { return nil, nil, errNotIssued }
func (stateInitial) metricsState(time.Time) string   { return StateNotYetIssued }
func (*stateWait) bundle() ([]byte, []byte, error)   { return nil, nil, errNotIssued }
func (*stateWait) metricsState(time.Time) string     { return StateNotYetIssued }
func (s *stateDenied) bundle() ([]byte, []byte, error) {
	return nil, nil, &TerminalError{State: StateDenied, Reason: s.reason, Message: s.message}
}
func (*stateDenied) metricsState(time.Time) string { return StateDenied }
func (s *stateFailed) bundle() ([]byte, []byte, error) {
	return nil, nil, &TerminalError{State: StateFailed, Reason: s.reason, Message: s.message}
}
func (*stateFailed) metricsState(time.Time) string { return StateFailed }

// Expired credentials keep being served: the pod decides what to do with them.
//
//nolint:unparam // the state interface's bundle: other states return errors
func (i *issued) bundle() ([]byte, []byte, error) { return i.privateKey, i.certChain, nil }

func (i *issued) metricsState(now time.Time) string {
	switch {
	case now.After(i.notAfter):
		return StateExpired
	case now.After(i.beginRefreshAt.Add(refreshOverdueDuration)):
		return StateOverdueForRefresh
	}
	return StateFresh
}
