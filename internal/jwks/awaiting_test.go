package jwks

import (
	"slices"
	"testing"
	"time"

	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
)

// awaiting waits for every server whose report holds and does not name the key, until the
// first of those reports runs out; a server whose report ran out is not waited for (it
// stopped answering before), nor one that answers the key.
func TestAwaitingServers(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	serving := func(kid string) jwkshttp.Report {
		return jwkshttp.Report{"ns/idp": {KeyID: kid, Since: now.Add(-time.Second)}}
	}
	for _, tc := range []struct {
		name    string
		reports []jwkshttp.ServerReport
		waiting []string
		wait    time.Duration
	}{
		{"no server reports", nil, nil, 0},
		{"every server answers the key", []jwkshttp.ServerReport{
			{Holder: "a", Until: now.Add(10 * time.Second), Serving: serving("new")},
			{Holder: "b", Until: now.Add(15 * time.Second), Serving: serving("new")},
		}, nil, 0},
		{"one answers an older key", []jwkshttp.ServerReport{
			{Holder: "a", Until: now.Add(10 * time.Second), Serving: serving("new")},
			{Holder: "b", Until: now.Add(15 * time.Second), Serving: serving("old")},
			{Holder: "c", Until: now.Add(12 * time.Second)},
		}, []string{"b", "c"}, 12 * time.Second},
		{"one whose report ran out", []jwkshttp.ServerReport{
			{Holder: "a", Until: now.Add(10 * time.Second), Serving: serving("new")},
			{Holder: "gone", Until: now},
		}, nil, 0},
	} {
		waiting, wait := awaiting(tc.reports, "ns/idp", "new", now)
		if !slices.Equal(waiting, tc.waiting) || wait != tc.wait {
			t.Errorf("%s: waiting for %v, at most %v; want %v, %v", tc.name, waiting, wait, tc.waiting, tc.wait)
		}
	}
}
