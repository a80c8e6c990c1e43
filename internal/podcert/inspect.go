package podcert

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StateUnknown is Inspect's state of a projection none of whose requests are left (the
// API server deletes PodCertificateRequests some time after they conclude): the node
// agent may well serve a certificate, and the API does not say which.
const StateUnknown = "unknown"

// Outcomes of one PodCertificateRequest in a RequestReport: its concluding condition's
// type, or Pending.
const (
	OutcomeIssued  = certificatesv1.PodCertificateRequestConditionTypeIssued
	OutcomeDenied  = certificatesv1.PodCertificateRequestConditionTypeDenied
	OutcomeFailed  = certificatesv1.PodCertificateRequestConditionTypeFailed
	OutcomePending = "Pending"
)

// RequestReport is one PodCertificateRequest of a projection, as the API has it.
type RequestReport struct {
	Name    string
	Created time.Time
	// KeyType is the key type of its public key, as a projection names it (ECDSAP256).
	KeyType string
	// Outcome is OutcomeIssued, OutcomeDenied, OutcomeFailed or OutcomePending; Reason and
	// Message are its condition's.
	Outcome, Reason, Message string
	// NotAfter and BeginRefreshAt are the issued certificate's (zero unless issued).
	NotAfter, BeginRefreshAt time.Time
}

// ProjectionReport is the state of one podCertificate projection of a pod, as the node
// agent's manager would have it from the pod's requests: which certificate is served
// (the newest issued), whether a refresh is pending, and the state kubelet reports.
type ProjectionReport struct {
	Key        Key
	SignerName string
	KeyType    string
	// State is one of the metric states (StateFresh, StateOverdueForRefresh, ...), or
	// StateUnknown.
	State string
	// Reason and Message say why, for denied and failed projections (the request's
	// condition) and for a pending or unknown one.
	Reason, Message string
	// NotAfter and BeginRefreshAt are those of the certificate served (zero: none).
	NotAfter, BeginRefreshAt time.Time
	// RefreshPending: a newer request than the served certificate's is pending.
	RefreshPending bool
	// Requests are the projection's requests, newest first.
	Requests []RequestReport
}

// Inspect reports every podCertificate projection of pod from the PodCertificateRequests
// of its namespace (those of other pods are ignored). A request belongs to a projection
// by its signer and key type; projections alike in both share their requests, as the API
// cannot tell them apart.
func Inspect(pod *corev1.Pod, pcrs []certificatesv1.PodCertificateRequest, now time.Time) []ProjectionReport {
	var keys []Key
	projections := Projections(pod)
	for k := range projections {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].VolumeName != keys[j].VolumeName {
			return keys[i].VolumeName < keys[j].VolumeName
		}
		return keys[i].SourceIndex < keys[j].SourceIndex
	})
	var reports []RequestReport
	var signers []string
	for i := range pcrs {
		p := &pcrs[i]
		if p.Spec.PodUID != pod.UID || p.Spec.PodName != pod.Name {
			continue
		}
		reports = append(reports, reportOf(p))
		signers = append(signers, p.Spec.SignerName)
	}
	out := make([]ProjectionReport, 0, len(keys))
	for _, k := range keys {
		src := projections[k]
		r := ProjectionReport{Key: k, SignerName: src.SignerName, KeyType: src.KeyType}
		for i, req := range reports {
			if signers[i] == src.SignerName && (src.KeyType == "" || req.KeyType == src.KeyType) {
				r.Requests = append(r.Requests, req)
			}
		}
		sort.SliceStable(r.Requests, func(i, j int) bool { return r.Requests[i].Created.After(r.Requests[j].Created) })
		r.decide(now)
		out = append(out, r)
	}
	return out
}

// decide is the state of the projection from its requests, newest first, as the
// manager's state machine leads there: a concluded request decides (the newest one);
// an issued certificate is served while a newer request is pending.
func (r *ProjectionReport) decide(now time.Time) {
	if len(r.Requests) == 0 {
		r.State, r.Message = StateUnknown, "no PodCertificateRequest of this pod for this signer and key type: none made yet, or deleted after it concluded"
		return
	}
	for i, req := range r.Requests {
		switch req.Outcome {
		case OutcomePending:
			continue
		case OutcomeDenied:
			r.State, r.Reason, r.Message = StateDenied, req.Reason, req.Message
		case OutcomeFailed:
			r.State, r.Reason, r.Message = StateFailed, req.Reason, req.Message
		case OutcomeIssued:
			r.NotAfter, r.BeginRefreshAt, r.RefreshPending = req.NotAfter, req.BeginRefreshAt, i > 0
			r.State = (&issued{notAfter: req.NotAfter, beginRefreshAt: req.BeginRefreshAt}).metricsState(now)
			if r.RefreshPending {
				r.Message = "refresh requested with " + r.Requests[0].Name + ", pending"
			}
		}
		return
	}
	newest := r.Requests[0]
	r.State, r.Reason = StateNotYetIssued, OutcomePending
	r.Message = fmt.Sprintf("%s is pending for %s: the signer has not concluded it", newest.Name, now.Sub(newest.Created).Round(time.Second))
}

func reportOf(p *certificatesv1.PodCertificateRequest) RequestReport {
	r := RequestReport{Name: p.Name, Created: p.CreationTimestamp.Time, Outcome: OutcomePending, KeyType: stubKeyType(p.Spec.StubPKCS10Request)}
	for _, t := range []string{OutcomeDenied, OutcomeFailed, OutcomeIssued} {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			r.Outcome, r.Reason, r.Message = t, c.Reason, c.Message
			break
		}
	}
	if r.Outcome == OutcomeIssued {
		if p.Status.NotAfter != nil {
			r.NotAfter = p.Status.NotAfter.Time
		}
		if p.Status.BeginRefreshAt != nil {
			r.BeginRefreshAt = p.Status.BeginRefreshAt.Time
		}
	}
	return r
}

// stubKeyType names the key type of a request's stub PKCS#10 request's public key, as a
// projection's keyType does; "" when it does not parse.
func stubKeyType(der []byte) string {
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return ""
	}
	switch k := csr.PublicKey.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA" + strings.ReplaceAll(k.Curve.Params().Name, "-", "")
	case ed25519.PublicKey:
		return "ED25519"
	}
	return ""
}
