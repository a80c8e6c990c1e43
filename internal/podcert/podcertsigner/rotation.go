package podcertsigner

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// rotationStep is what one reconcile of the CA does to the rotation: the rotation after
// it, the operator-facing annotations to write with it ("" removes one), the events to
// record once it is written, the state it is in, and when it wants to look again.
type rotationStep struct {
	rot         *podcert.Rotation
	changed     bool
	annotations map[string]string
	events      []caEvent
	state       string
	wakeAt      time.Time
}

type caEvent struct{ eventType, reason, message string }

func (s *rotationStep) record(eventType, reason, format string, args ...any) {
	s.events = append(s.events, caEvent{eventType, reason, fmt.Sprintf(format, args...)})
}

// stepRotationLocked moves the rotation as far as now allows, in the order an operator
// reads it: the operator's rollback, the operator's hold, the schedule (Advance: generate,
// sign, retire), then the canary of a previewed next CA. Each move is one the rotation
// persisted before allows, so a restart between two resumes at the second. r.mu is held.
func (r *Reconciler) stepRotationLocked(ctx context.Context, rot *podcert.Rotation, now time.Time) (*rotationStep, error) {
	p := r.opts.rotationPolicy()
	step := &rotationStep{rot: rot.Clone(), annotations: map[string]string{}}
	operator := r.secret.Annotations
	if want := operator[certificates.AnnotationCARollback]; want != "" && want != operator[certificates.AnnotationCARollbackHandled] {
		if dropped := step.rot.Next; step.rot.RollBack() {
			step.record(corev1.EventTypeNormal, certificates.ReasonCARolledBack, "next CA %s dropped from the bundles (%s=%s); CA %s signs on",
				short(dropped), certificates.AnnotationCARollback, want, short(step.rot.Current))
		}
		step.annotations[certificates.AnnotationCARollbackHandled] = want
		step.changed = true
	}
	if operator[certificates.AnnotationCARotationHold] == "true" {
		return r.concludeStep(step), nil
	}
	before := step.rot.Clone()
	changed, err := step.rot.Advance(now, p, r.generateCA)
	if err != nil {
		return nil, err
	}
	step.changed = step.changed || changed
	recordScheduleMoves(step, before, p)
	if err := r.stepCanaryLocked(ctx, step, now); err != nil {
		return nil, err
	}
	return r.concludeStep(step), nil
}

// stepCanaryLocked observes the canaries of a previewed next CA and, once they have been
// observed for the whole observation time, judges them: live, or failed (held).
func (r *Reconciler) stepCanaryLocked(ctx context.Context, step *rotationStep, now time.Time) error {
	rot, p := step.rot, r.opts.rotationPolicy()
	if rot.Next == nil || rot.Canary.Stage != podcert.StagePreview || rot.Canary.Failed != "" {
		return nil
	}
	who, err := r.selectCanaries(ctx)
	if err != nil {
		return err
	}
	if rot.Observe(now, !who.empty()) {
		step.changed = true
		if !who.empty() {
			step.record(corev1.EventTypeNormal, certificates.ReasonCAPreview, "observing the canaries of next CA %s (%s) until %s",
				short(rot.Next), who, rot.ObservationEnds(p).UTC().Format(time.RFC3339))
		}
	}
	ends := rot.ObservationEnds(p)
	if ends.IsZero() {
		return nil
	}
	var why string
	if now.Before(ends) {
		// Before the end only what went wrong so far (the Events that woke this reconcile).
		if why, err = r.canaryTroubles(ctx, who, rot.Canary.ObservedSince); err != nil || why == "" {
			step.wakeAt = ends
			return err
		}
	} else if why, err = r.judgeCanary(ctx, rot, who, rot.Canary.ObservedSince, now); err != nil {
		return err
	}
	step.changed = true
	if why != "" {
		rot.Fail(why)
		canaryVerdictsCounter.WithLabelValues(r.opts.SignerName, verdictFailed).Inc()
		step.record(corev1.EventTypeWarning, certificates.ReasonCanaryFailed, "next CA %s held in the preview bundle: %s", short(rot.Next), why)
		return nil
	}
	rot.GoLive(now, p)
	canaryVerdictsCounter.WithLabelValues(r.opts.SignerName, verdictPassed).Inc()
	step.record(corev1.EventTypeNormal, certificates.ReasonCALive, "next CA %s passed its canaries (%s) and is in the live bundle; it signs at %s",
		short(rot.Next), who, rot.NextSignsAt.UTC().Format(time.RFC3339))
	return nil
}

// recordScheduleMoves records the moves Advance made: a next CA published (in preview, or
// live at once), a next CA signing, retired CAs gone.
func recordScheduleMoves(step *rotationStep, before *podcert.Rotation, p podcert.RotationPolicy) {
	after := step.rot
	if after.Current.Fingerprint() != before.Current.Fingerprint() {
		step.record(corev1.EventTypeNormal, certificates.ReasonCASigning, "CA %s signs; CA %s stays in the bundles until its last leaf expires",
			short(after.Current), short(before.Current))
	}
	if after.Next != nil && (before.Next == nil || before.Next.Fingerprint() != after.Next.Fingerprint() || before.Canary.Stage != after.Canary.Stage) {
		switch after.Canary.Stage {
		case podcert.StagePreview:
			step.record(corev1.EventTypeNormal, certificates.ReasonCAPreview, "next CA %s published in the preview bundle; it goes live after %v of canaries observed",
				short(after.Next), p.Observation)
		case podcert.StageLive:
			step.record(corev1.EventTypeNormal, certificates.ReasonCALive, "next CA %s published in the live bundle; it signs at %s",
				short(after.Next), after.NextSignsAt.UTC().Format(time.RFC3339))
		}
	}
	kept := map[string]bool{}
	for _, e := range append([]*podcert.CAEntry{after.Current, after.Next}, after.Previous...) {
		if e != nil {
			kept[e.Fingerprint()] = true
		}
	}
	for _, e := range append([]*podcert.CAEntry{before.Current}, before.Previous...) {
		if !kept[e.Fingerprint()] {
			step.record(corev1.EventTypeNormal, certificates.ReasonCARetired, "CA %s left the bundles: its last leaf expired", short(e))
		}
	}
}

// concludeStep sets the step's state and the status annotation that says it, recording
// a Warning when the rotation comes to wait for canaries that nothing selects, or is held.
func (r *Reconciler) concludeStep(step *rotationStep) *rotationStep {
	reason, message := r.rotationStatus(step.rot)
	step.state = stateOf(reason)
	status := ""
	if reason != "" {
		status = reason + ": " + message
	}
	if status != r.secret.Annotations[certificates.AnnotationCARotationStatus] {
		step.annotations[certificates.AnnotationCARotationStatus] = status
		step.changed = true
		if reason == certificates.ReasonCanaryTargetsNothing || reason == certificates.ReasonCARotationHeld {
			step.record(corev1.EventTypeWarning, reason, "%s", message)
		}
	}
	return step
}

// stateOf is the state in trustplane_podcertificate_signer_ca_rotation_state of each
// reason of the rotation's condition ("": no next CA).
func stateOf(reason string) string {
	switch reason {
	case certificates.ReasonCARotationHeld:
		return stateHeld
	case certificates.ReasonCanaryFailed:
		return stateFailed
	case certificates.ReasonCanaryTargetsNothing:
		return statePreview
	case certificates.ReasonCAPreview:
		return stateObserving
	case certificates.ReasonCALive:
		return stateLive
	}
	return stateIdle
}

// rotationStatus is the rotation's condition: the reason and message of
// AnnotationCARotationStatus (no reason: nothing in progress).
func (r *Reconciler) rotationStatus(rot *podcert.Rotation) (string, string) {
	p := r.opts.rotationPolicy()
	if r.secret.Annotations[certificates.AnnotationCARotationHold] == "true" {
		return certificates.ReasonCARotationHeld, fmt.Sprintf("held by %s=true at stage %q; remove it to go on", certificates.AnnotationCARotationHold, stageName(rot))
	}
	switch {
	case rot.Next == nil:
		return "", ""
	case rot.Canary.Stage == podcert.StagePreview && rot.Canary.Failed != "":
		return certificates.ReasonCanaryFailed, rot.Canary.Failed
	case rot.Canary.Stage == podcert.StagePreview && rot.Canary.ObservedSince.IsZero():
		return certificates.ReasonCanaryTargetsNothing, fmt.Sprintf("next CA %s waits in the preview bundle: no namespace matches %q and no node matches %q",
			short(rot.Next), r.opts.CanaryNamespaceSelector, r.opts.CanaryNodeSelector)
	case rot.Canary.Stage == podcert.StagePreview:
		return certificates.ReasonCAPreview, fmt.Sprintf("next CA %s in the preview bundle since %s; canaries observed since %s, live at %s if they pass",
			short(rot.Next), stamp(rot.Canary.PreviewSince), stamp(rot.Canary.ObservedSince), stamp(rot.ObservationEnds(p)))
	default:
		return certificates.ReasonCALive, fmt.Sprintf("next CA %s in the live bundle since %s; it signs at %s", short(rot.Next), stamp(rot.Canary.LiveSince), stamp(rot.NextSignsAt))
	}
}

func stageName(rot *podcert.Rotation) string {
	if rot.Next == nil {
		return "idle"
	}
	if rot.Canary.Stage == "" {
		return podcert.StageLive
	}
	return rot.Canary.Stage
}

func short(e *podcert.CAEntry) string {
	if e == nil {
		return "-"
	}
	return e.Fingerprint()[:16]
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
