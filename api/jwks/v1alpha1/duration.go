package v1alpha1

import (
	"time"

	"github.com/trustplane/trustplane/api/duration"
)

// DurationPattern is what a Duration must match (duration.Pattern).
const DurationPattern = duration.Pattern

// Duration is a length of time written as Go writes it, e.g. "720h" or "1h30m": a string
// on purpose (package api/duration says why).
//
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}(h|m|s|ms)){1,4}$')",message="must be a duration such as 720h, 90m or 1h30m: whole numbers with the units h, m, s or ms (no days, spaces or signs)"
type Duration string

// Parse returns the duration, or an error for a value admission would refuse.
func (d Duration) Parse() (time.Duration, error) { return duration.Parse(string(d)) }

// DurationOf is d, rounded down to the millisecond, written as a Duration ("1h30m").
func DurationOf(d time.Duration) *Duration {
	v := Duration(duration.Format(d))
	return &v
}
