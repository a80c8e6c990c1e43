// Package duration is how trustplane's APIs write a length of time: as Go writes it
// ("720h", "1h30m"), in a string field that admission checks against Pattern. Each API
// group declares its own Duration type with the CEL rule (the CRD generator needs the
// markers on the type) and parses it here.
//
// A string, not metav1.Duration, on purpose: the API server refuses malformed values at
// admission, but an object stored before that rule existed (say "30d") must still decode,
// or the whole informer fails to list and no object of the kind is reconciled. The
// controller parses it and reports a bad one as InvalidSpec. Gateway API's Duration is a
// string too.
package duration

import (
	"fmt"
	"regexp"
	"time"
)

// Pattern is what a duration must match: one to four whole numbers of at most five
// digits, each with a unit of h, m, s or ms ("720h", "90m", "1h30m", "500ms"). Every such
// string is one time.ParseDuration accepts, and none overflows it. The CRDs' CEL rules use
// the same expression (TestTheCRDsCheckDurationsAsParseDoes checks they agree).
const Pattern = `^([0-9]{1,5}(h|m|s|ms)){1,4}$`

var re = regexp.MustCompile(Pattern)

// Parse returns the duration s writes, or an error for a value admission would refuse.
func Parse(s string) (time.Duration, error) {
	if !re.MatchString(s) {
		return 0, fmt.Errorf("%q is not a duration such as 720h, 90m or 1h30m (units h, m, s, ms; no days, spaces or signs)", s)
	}
	return time.ParseDuration(s)
}

// Format writes d, rounded down to the millisecond, as Parse reads it ("1h30m"; "0s"
// for less than a millisecond).
func Format(d time.Duration) string {
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
	return s
}
