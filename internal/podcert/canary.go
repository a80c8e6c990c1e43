package podcert

import (
	"time"

	"github.com/trustplane/trustplane/api/certificates"
)

// Stages of a next CA (certificates.AnnotationNextStage).
const (
	// StagePreview: the next CA is in the preview bundle only; the canaries are observed.
	StagePreview = "preview"
	// StageLive: the next CA is in the live bundle too, and signs at NextSignsAt.
	StageLive = "live"
)

// Canary is the state of the next CA's way into the live bundle. It lives in the CA
// Secret's annotations, so a restart resumes it at its step: no step is skipped (each
// moves only from the one persisted before it) and none repeated (a step's time is
// persisted with it).
type Canary struct {
	// Stage is StagePreview or StageLive ("" without a next CA).
	Stage string
	// PreviewSince is when the next CA entered the preview bundle.
	PreviewSince time.Time
	// ObservedSince is when the observation began: the first moment in preview with a
	// canary selected (zero while none is, and after a failure).
	ObservedSince time.Time
	// LiveSince is when the next CA entered the live bundle.
	LiveSince time.Time
	// Failed says why the canary failed (empty: it has not). The rotation holds while set.
	Failed string
}

// ObservationEnds is when the canaries will have been observed for p.Observation (zero
// while the observation has not begun).
func (r *Rotation) ObservationEnds(p RotationPolicy) time.Time {
	if r.Canary.Stage != StagePreview || r.Canary.ObservedSince.IsZero() || r.Canary.Failed != "" {
		return time.Time{}
	}
	return r.Canary.ObservedSince.Add(p.Observation)
}

// Observe records whether the canary selectors select anything at now: the observation
// begins the first time they do, and begins again after a time they select nothing (a
// canary must be watched for the whole observation). It reports whether anything changed.
func (r *Rotation) Observe(now time.Time, selected bool) bool {
	if r.Canary.Stage != StagePreview || r.Canary.Failed != "" {
		return false
	}
	switch {
	case selected && r.Canary.ObservedSince.IsZero():
		r.Canary.ObservedSince = now.Truncate(time.Second)
		return true
	case !selected && !r.Canary.ObservedSince.IsZero():
		r.Canary.ObservedSince = time.Time{}
		return true
	}
	return false
}

// Fail records why the canary failed: the next CA stays in the preview bundle only, and
// nothing moves until the operator clears the failure or rolls back.
func (r *Rotation) Fail(why string) {
	r.Canary.Failed, r.Canary.ObservedSince = why, time.Time{}
}

// GoLive puts the previewed next CA into the live bundle at now; it signs after p.Overlap.
func (r *Rotation) GoLive(now time.Time, p RotationPolicy) {
	if r.Next != nil && r.Canary.Stage == StagePreview {
		r.goLive(now, p)
	}
}

func (r *Rotation) goLive(now time.Time, p RotationPolicy) {
	r.Canary.Stage, r.Canary.LiveSince, r.Canary.ObservedSince = StageLive, now.Truncate(time.Second), time.Time{}
	r.NextSignsAt = now.Add(p.Overlap).Truncate(time.Second).Add(time.Second)
}

// RollBack drops the next CA before it signs: it leaves both bundles. It reports whether
// there was one.
func (r *Rotation) RollBack() bool {
	if r.Next == nil {
		return false
	}
	r.Next, r.NextSignsAt, r.Canary = nil, time.Time{}, Canary{}
	return true
}

func canaryFromAnnotations(annotations map[string]string, parseTime func(string) (time.Time, error)) (Canary, error) {
	c := Canary{Stage: annotations[certificates.AnnotationNextStage], Failed: annotations[certificates.AnnotationCanaryFailed]}
	var err error
	for _, f := range []struct {
		name string
		into *time.Time
	}{
		{certificates.AnnotationNextPreviewSince, &c.PreviewSince},
		{certificates.AnnotationCanaryObservedSince, &c.ObservedSince},
		{certificates.AnnotationNextLiveSince, &c.LiveSince},
	} {
		if *f.into, err = parseTime(f.name); err != nil {
			return Canary{}, err
		}
	}
	if c.Stage != StagePreview && c.Stage != StageLive {
		c.Stage = "" // unknown or absent: a next CA from before canaries, scheduled as before
	}
	return c, nil
}

func (c Canary) toAnnotations(annotations map[string]string) {
	set := func(name, value string) {
		if value != "" {
			annotations[name] = value
		}
	}
	setTime := func(name string, t time.Time) {
		if !t.IsZero() {
			annotations[name] = t.UTC().Format(time.RFC3339)
		}
	}
	set(certificates.AnnotationNextStage, c.Stage)
	setTime(certificates.AnnotationNextPreviewSince, c.PreviewSince)
	setTime(certificates.AnnotationCanaryObservedSince, c.ObservedSince)
	setTime(certificates.AnnotationNextLiveSince, c.LiveSince)
	set(certificates.AnnotationCanaryFailed, c.Failed)
}
