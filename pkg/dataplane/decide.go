// Package dataplane is the data-plane side of Tengine-Ingress's secret global consistency,
// as a library a gateway can embed: decide whether the secrets it sees agree with what
// the control plane published, and keep the last verified set on disk — written
// atomically, guarded by a checksum, restorable when the API server is away.
package dataplane

import (
	"time"

	"github.com/trustplane/trustplane/internal/checksum"
)

// Published is one SecretCheckSum as the data plane sees it.
type Published struct {
	Name     string
	Checksum string
	IDs      []string
	Created  time.Time
}

// Verdict is the outcome of comparing the local view with the published checksums.
type Verdict struct {
	// Trusted says the local secrets may be used.
	Trusted bool
	// Reason is Match, NoChecksumFailOpen, NoChecksumFailClosed or Mismatch.
	Reason string
	// Checksum is the local checksum.
	Checksum string
	// Against is the newest published object, the one a mismatch is diffed against.
	Against string
	// LocalOnly and PublishedOnly are the exact differing IDs of a mismatch.
	LocalOnly, PublishedOnly []string
}

// Verdict reasons.
const (
	Match                = "Match"
	Mismatch             = "Mismatch"
	NoChecksumFailOpen   = "NoChecksumFailOpen"
	NoChecksumFailClosed = "NoChecksumFailClosed"
)

// Decide compares local IDs with the published checksums the way Tengine-Ingress does:
// trusted when *any* published checksum equals the local one; otherwise the IDs are
// diffed against the newest object (by creation time). With nothing published, failOpen
// decides (Tengine is fail-open).
func Decide(localIDs []string, published []Published, failOpen bool) Verdict {
	v := Verdict{Checksum: checksum.Sum(localIDs)}
	if len(published) == 0 {
		v.Trusted, v.Reason = failOpen, NoChecksumFailClosed
		if failOpen {
			v.Reason = NoChecksumFailOpen
		}
		return v
	}
	newest := published[0]
	for _, p := range published {
		if p.Checksum == v.Checksum {
			v.Trusted, v.Reason, v.Against = true, Match, p.Name
			return v
		}
		if p.Created.After(newest.Created) || (p.Created.Equal(newest.Created) && p.Name > newest.Name) {
			newest = p
		}
	}
	v.Reason, v.Against = Mismatch, newest.Name
	v.LocalOnly, v.PublishedOnly = checksum.Diff(localIDs, newest.IDs)
	return v
}
