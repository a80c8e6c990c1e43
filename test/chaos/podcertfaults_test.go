package chaos

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/trustplane/trustplane/api/certificates"
)

// TestClockJumpBounds: what a node agent's clock may have been, from the jumps the fault
// made: a forward jump runs it ahead while it lasts and clockApplyLag after, a backward
// one never ahead; a warning is justified only by a certificate past its time on that
// clock.
func TestClockJumpBounds(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	n := &agentNode{name: "n"}
	s := &podcertSystem{pods: map[string]*podcertPod{"p": {name: "p", node: n}}, leaves: map[string]*issuedLeaf{
		"ns/req-1": {pod: "p", kind: "annotation", beginRefreshAt: now.Add(-5 * time.Minute), notAfter: now.Add(5 * time.Minute)},
	}}
	if got := s.clockReached(n, now); !got.Equal(now) {
		t.Errorf("no jump: clock reached %v, want now", got)
	}
	n.jumps = []clockJump{
		{offset: -10 * time.Minute, start: now.Add(-time.Hour), end: now.Add(-50 * time.Minute)},
		{offset: 10 * time.Minute, start: now.Add(-12 * time.Minute), end: now.Add(-2 * time.Minute)},
	}
	if got, want := s.clockReached(n, now), now.Add(8*time.Minute+clockApplyLag); !got.Equal(want) {
		t.Errorf("a forward jump that ended: clock reached %v, want its end + lag + 10m = %v", got, want)
	}
	if got := s.offsetAt(n, now.Add(-55*time.Minute)); got != 0 {
		t.Errorf("during the backward jump: largest offset %v, want 0", got)
	}
	if got := s.offsetAt(n, now.Add(-2*time.Minute+clockApplyLag/2)); got != 10*time.Minute {
		t.Errorf("just after the forward jump ended: largest offset %v, want 10m (the agent reads the file late)", got)
	}
	if got := s.forwardJumpsSince(n, now.Add(-15*time.Minute), now); got != 1 {
		t.Errorf("forward jumps during a pod's life: %d, want 1", got)
	}
	if got := s.forwardJumpsSince(n, now.Add(-time.Minute), now); got != 0 {
		t.Errorf("forward jumps before a pod's life: %d, want 0", got)
	}

	expired := eventsv1.Event{Reason: certificates.ReasonExpired, Type: corev1.EventTypeWarning, Regarding: corev1.ObjectReference{Name: "p"}}
	overdue := expired
	overdue.Reason = certificates.ReasonOverdueForRefresh
	for _, tc := range []struct {
		name string
		e    eventsv1.Event
		at   time.Time
		want bool
	}{
		{"expired before notAfter, real clock", expired, now.Add(3 * time.Minute), false},
		{"expired after notAfter", expired, now.Add(6 * time.Minute), true},
		{"expired, clock 10m ahead but notAfter 15m away", expired, now.Add(-10 * time.Minute), false},
		{"expired, clock 10m ahead and notAfter 8m away", expired, now.Add(-3 * time.Minute), true},
		{"overdue 5m past beginRefreshAt", overdue, now.Add(3 * time.Minute), false},
		{"overdue 11m past beginRefreshAt", overdue, now.Add(6 * time.Minute), true},
	} {
		if got := s.warningJustified(tc.e, tc.at); got != tc.want {
			t.Errorf("%s: justified %v, want %v", tc.name, got, tc.want)
		}
	}
	n.jumps = append(n.jumps, clockJump{offset: 10 * time.Minute, start: now.Add(-time.Second)})
	if !s.warningJustified(expired, now) || !s.warningJustified(overdue, now) {
		t.Error("with the agent's clock 10m ahead now, the certificate is expired and overdue by it: the warnings are justified")
	}
	if expiredN, overdueN := s.projectionsPast(n, now.Add(10*time.Minute)); expiredN != 1 || overdueN != 1 {
		t.Errorf("projections past on the skewed clock: %d expired, %d overdue, want 1 and 1", expiredN, overdueN)
	}
}

func TestStateCount(t *testing.T) {
	body := `# HELP trustplane_podcertificate_states Pod certificate projections
trustplane_podcertificate_states{signer_name="a",state="expired"} 2
trustplane_podcertificate_states{signer_name="b",state="expired"} 1
trustplane_podcertificate_states{signer_name="a",state="fresh"} 7
`
	if got := stateCount(body, "expired"); got != 3 {
		t.Errorf("expired: %d, want 3", got)
	}
	if got := stateCount(body, "overdue_for_refresh"); got != 0 {
		t.Errorf("overdue_for_refresh: %d, want 0", got)
	}
}
