package podcert

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInspect(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	_, p256, err := GenerateKeyAndProof("ECDSAP256")
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := GenerateKeyAndProof("ED25519")
	if err != nil {
		t.Fatal(err)
	}
	projection := func(signer, keyType string) corev1.VolumeProjection {
		return corev1.VolumeProjection{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: keyType}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "pod-uid"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				projection("example.com/fresh", "ECDSAP256"), projection("example.com/refreshing", "ECDSAP256")}}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				projection("example.com/denied", "ECDSAP256"), projection("example.com/pending", "ECDSAP256"),
				projection("example.com/expired", "ED25519"), projection("example.com/gone", "ECDSAP256")}}}},
		}}}
	pcr := func(name, signer string, created time.Duration, stub []byte, cond string, notAfter, refresh time.Duration) certificatesv1.PodCertificateRequest {
		p := certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, CreationTimestamp: metav1.NewTime(now.Add(created))},
			Spec: certificatesv1.PodCertificateRequestSpec{SignerName: signer, PodName: "web", PodUID: "pod-uid", StubPKCS10Request: stub}}
		if cond != "" {
			p.Status.Conditions = []metav1.Condition{{Type: cond, Status: metav1.ConditionTrue, Reason: cond + "Reason", Message: "said " + cond}}
		}
		if cond == OutcomeIssued {
			p.Status.NotAfter, p.Status.BeginRefreshAt = &metav1.Time{Time: now.Add(notAfter)}, &metav1.Time{Time: now.Add(refresh)}
		}
		return p
	}
	pcrs := []certificatesv1.PodCertificateRequest{
		pcr("fresh-1", "example.com/fresh", -time.Hour, p256, OutcomeIssued, 23*time.Hour, 20*time.Hour),
		pcr("old-1", "example.com/refreshing", -25*time.Hour, p256, OutcomeIssued, -time.Hour, -5*time.Hour),
		pcr("ref-1", "example.com/refreshing", -2*time.Hour, p256, OutcomeIssued, time.Hour, -30*time.Minute),
		pcr("ref-2", "example.com/refreshing", -time.Minute, p256, "", 0, 0),
		pcr("den-1", "example.com/denied", -time.Hour, p256, OutcomeDenied, 0, 0),
		pcr("pen-1", "example.com/pending", -90*time.Second, p256, "", 0, 0),
		pcr("pen-ed", "example.com/pending", -time.Hour, ed, OutcomeIssued, time.Hour, time.Minute), // another key type
		pcr("exp-1", "example.com/expired", -48*time.Hour, ed, OutcomeIssued, -time.Minute, -10*time.Hour),
		func() certificatesv1.PodCertificateRequest { // another pod of the same name
			p := pcr("other", "example.com/gone", -time.Hour, p256, OutcomeIssued, time.Hour, time.Minute)
			p.Spec.PodUID = "older-pod"
			return p
		}(),
	}
	got := Inspect(pod, pcrs, now)
	want := []struct {
		signer, state, reason string
		requests              int
		refreshPending        bool
	}{
		{"example.com/fresh", StateFresh, "", 1, false},
		{"example.com/refreshing", StateOverdueForRefresh, "", 3, true},
		{"example.com/denied", StateDenied, "DeniedReason", 1, false},
		{"example.com/pending", StateNotYetIssued, OutcomePending, 1, false},
		{"example.com/expired", StateExpired, "", 1, false},
		{"example.com/gone", StateUnknown, "", 0, false},
	}
	if len(got) != len(want) {
		t.Fatalf("%d projections, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.SignerName != w.signer || g.State != w.state || g.Reason != w.reason || len(g.Requests) != w.requests || g.RefreshPending != w.refreshPending {
			t.Errorf("projection %d: got %s %s %q %d requests, refresh pending %t; want %+v", i, g.SignerName, g.State, g.Reason, len(g.Requests), g.RefreshPending, w)
		}
	}
	if r := got[1]; r.Requests[0].Name != "ref-2" || !r.NotAfter.Equal(now.Add(time.Hour)) || r.Requests[1].KeyType != "ECDSAP256" {
		t.Errorf("refreshing: %+v", r)
	}
	if got[3].Message != "pen-1 is pending for 1m30s: the signer has not concluded it" {
		t.Errorf("pending message %q", got[3].Message)
	}
}
