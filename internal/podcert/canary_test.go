package podcert

import (
	"strings"
	"testing"
	"time"
)

// restart is a manager restart: the rotation as the next manager reads it from the Secret.
func restart(t *testing.T, r *Rotation) *Rotation {
	t.Helper()
	data, annotations := r.ToSecret()
	// Any time within the current CA's validity: the CAs are checked on load.
	got, err := RotationFromSecret(data, annotations, r.Current.Cert.NotBefore.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func bundleHas(bundle string, e *CAEntry) bool { return strings.Contains(bundle, string(e.CertPEM)) }

// TestCanaryStages: with an observation time, a generated next CA is in the preview bundle
// only; the observation begins when a canary is selected and begins again after a time
// none is; GoLive puts it in the live bundle, and it signs an overlap later; a failure
// holds it; a rollback drops it. Every step survives a restart (the Secret round trip),
// and Advance alone never moves a previewed CA forward.
func TestCanaryStages(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	p := RotationPolicy{Every: 24 * time.Hour, Overlap: time.Hour, Observation: 2 * time.Hour, MaxLifetime: 3 * time.Hour}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	generate := func(now time.Time) (*CAEntry, error) { return NewCA("test CA", now, 30*24*time.Hour) }
	first, _ := generate(start)
	first.Reserved = start.Add(100 * time.Hour) // it signed a leaf that lives that long
	rot := &Rotation{Current: first, SigningSince: start}

	// Generated Overlap+Observation before the current CA's turn ends.
	if at := rot.NextChange(p); !at.Equal(start.Add(21 * time.Hour)) {
		t.Fatalf("next change %v, want 21h after the start", at)
	}
	now := start.Add(21 * time.Hour)
	if changed, err := rot.Advance(now, p, generate); err != nil || !changed {
		t.Fatalf("advance: %v %v", changed, err)
	}
	rot = restart(t, rot)
	next := rot.Next
	if next == nil || rot.Canary.Stage != StagePreview || !rot.Canary.PreviewSince.Equal(now) || !rot.NextSignsAt.IsZero() {
		t.Fatalf("after generation: next %v, canary %+v, signs at %v", next != nil, rot.Canary, rot.NextSignsAt)
	}
	if bundleHas(rot.Bundle(), next) || !bundleHas(rot.PreviewBundle(), next) || !bundleHas(rot.PreviewBundle(), first) {
		t.Fatal("in preview the next CA must be in the preview bundle (beside the current one) and not in the live bundle")
	}
	// Advance alone, however late, never makes it live or lets it sign.
	if _, err := rot.Advance(now.Add(48*time.Hour), p, generate); err != nil || rot.Current != first && rot.Current.Fingerprint() != first.Fingerprint() || rot.Canary.Stage != StagePreview {
		t.Fatalf("advance moved a previewed CA: stage %s, err %v", rot.Canary.Stage, err)
	}

	// Nothing selected: no observation. Selected: it begins, and ends Observation later.
	if rot.Observe(now, false) || !rot.ObservationEnds(p).IsZero() {
		t.Fatal("observation began with nothing selected")
	}
	now = now.Add(10 * time.Minute)
	if !rot.Observe(now, true) {
		t.Fatal("observation did not begin")
	}
	rot = restart(t, rot)
	if !rot.ObservationEnds(p).Equal(now.Add(p.Observation)) {
		t.Fatalf("observation ends %v, want %v", rot.ObservationEnds(p), now.Add(p.Observation))
	}
	// The canaries went away for a while: the observation begins again when they are back.
	if !rot.Observe(now.Add(time.Hour), false) || !rot.Observe(now.Add(90*time.Minute), true) {
		t.Fatal("the observation did not restart")
	}
	rot = restart(t, rot)
	if want := now.Add(90 * time.Minute).Add(p.Observation); !rot.ObservationEnds(p).Equal(want) {
		t.Fatalf("observation ends %v, want %v", rot.ObservationEnds(p), want)
	}

	// A failure holds: no observation, and GoLive is the caller's to withhold.
	failed := rot.Clone()
	failed.Fail("pod x: CertificateOverdueForRefresh")
	failed = restart(t, failed)
	if failed.Canary.Failed != "pod x: CertificateOverdueForRefresh" || !failed.ObservationEnds(p).IsZero() || failed.Observe(now, true) {
		t.Fatalf("failure not held: %+v", failed.Canary)
	}
	// A rollback drops the next CA from both bundles; the current one signs on.
	rolled := failed.Clone()
	if !rolled.RollBack() {
		t.Fatal("nothing rolled back")
	}
	rolled = restart(t, rolled)
	if rolled.Next != nil || bundleHas(rolled.PreviewBundle(), next) || rolled.Canary != (Canary{}) || rolled.Current.Fingerprint() != first.Fingerprint() {
		t.Fatalf("rollback left %v %+v", rolled.Next != nil, rolled.Canary)
	}

	// Live: in the live bundle, signing an overlap later; then the old CA is previous.
	now = rot.ObservationEnds(p)
	rot.GoLive(now, p)
	rot = restart(t, rot)
	if rot.Canary.Stage != StageLive || !rot.Canary.LiveSince.Equal(now) || !bundleHas(rot.Bundle(), next) || !rot.NextSignsAt.Equal(now.Add(p.Overlap).Add(time.Second)) {
		t.Fatalf("live: %+v, signs at %v", rot.Canary, rot.NextSignsAt)
	}
	if _, err := rot.Advance(rot.NextSignsAt.Add(-time.Second), p, generate); err != nil || rot.Current.Fingerprint() != first.Fingerprint() {
		t.Fatal("signed before the overlap passed")
	}
	if _, err := rot.Advance(rot.NextSignsAt, p, generate); err != nil || rot.Current.Fingerprint() != next.Fingerprint() {
		t.Fatal("did not sign after the overlap")
	}
	rot = restart(t, rot)
	if rot.Canary != (Canary{}) || len(rot.Previous) != 1 || rot.Previous[0].Fingerprint() != first.Fingerprint() || !bundleHas(rot.Bundle(), first) {
		t.Fatalf("after signing: canary %+v, previous %d", rot.Canary, len(rot.Previous))
	}
}

// TestCanaryOffKeepsTheOldSchedule: without an observation time, a next CA is live at
// once, as before canaries; a next CA scheduled by an older manager (no stage annotation)
// keeps its time even once canaries are on.
func TestCanaryOffKeepsTheOldSchedule(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	p := RotationPolicy{Every: 24 * time.Hour, Overlap: time.Hour, MaxLifetime: 3 * time.Hour}
	generate := func(now time.Time) (*CAEntry, error) { return NewCA("test CA", now, 30*24*time.Hour) }
	first, _ := generate(start)
	rot := &Rotation{Current: first, SigningSince: start}
	now := start.Add(23 * time.Hour)
	if _, err := rot.Advance(now, p, generate); err != nil || rot.Next == nil || !bundleHas(rot.Bundle(), rot.Next) || !rot.NextSignsAt.Equal(now.Add(p.Overlap).Add(time.Second)) {
		t.Fatalf("without canary: next %v, signs at %v, err %v", rot.Next != nil, rot.NextSignsAt, err)
	}
	data, annotations := rot.ToSecret()
	delete(annotations, "podcert.trustplane.io/next-stage")
	delete(annotations, "podcert.trustplane.io/next-live-since")
	old, err := RotationFromSecret(data, annotations, now)
	if err != nil {
		t.Fatal(err)
	}
	p.Observation = 30 * time.Minute
	signsAt := old.NextSignsAt
	if _, err := old.Advance(now.Add(time.Minute), p, generate); err != nil || !old.NextSignsAt.Equal(signsAt) || !bundleHas(old.Bundle(), old.Next) {
		t.Fatalf("an older manager's schedule changed: %v → %v", signsAt, old.NextSignsAt)
	}
}
