package v1alpha1

import (
	"fmt"
	"regexp"
	"time"
)

// DurationPattern is what a Duration must match: one to four whole numbers of at most
// five digits, each with a unit of h, m, s or ms ("720h", "90m", "1h30m", "500ms"). Every
// such string is one time.ParseDuration accepts, and none overflows it. The CRD's CEL rule
// on Duration uses the same expression (a test checks they agree).
const DurationPattern = `^([0-9]{1,5}(h|m|s|ms)){1,4}$`

var durationRE = regexp.MustCompile(DurationPattern)

// A string, not metav1.Duration, on purpose: the API server refuses malformed values at
// admission, but an object stored before that rule existed (say "30d") must still decode,
// or the whole informer fails to list and no JWKSConfig is reconciled. The controller
// parses it and reports a bad one as InvalidSpec. Gateway API's Duration is a string too.

// Duration is a length of time written as Go writes it, e.g. "720h" or "1h30m".
//
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}(h|m|s|ms)){1,4}$')",message="must be a duration such as 720h, 90m or 1h30m: whole numbers with the units h, m, s or ms (no days, spaces or signs)"
type Duration string

// Parse returns the duration, or an error for a value admission would refuse.
func (d Duration) Parse() (time.Duration, error) {
	if !durationRE.MatchString(string(d)) {
		return 0, fmt.Errorf("%q is not a duration such as 720h, 90m or 1h30m (units h, m, s, ms; no days, spaces or signs)", string(d))
	}
	return time.ParseDuration(string(d))
}

// DurationOf is d, rounded down to the millisecond, written as a Duration ("1h30m").
func DurationOf(d time.Duration) *Duration {
	var s string
	for _, unit := range []struct {
		size time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / unit.size; n > 0 {
			s += fmt.Sprintf("%d%s", n, unit.name)
			d -= n * unit.size
		}
	}
	if s == "" {
		s = "0s"
	}
	v := Duration(s)
	return &v
}
