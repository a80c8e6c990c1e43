// Package dataplane is the data-plane side of Tengine-Ingress's secret global consistency,
// as a library a gateway can embed: decide whether the secrets it sees agree with what
// the control plane published, and keep the last verified set on disk — written
// atomically, guarded by a checksum, restorable when the API server is away.
package dataplane

import (
	"time"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
)

// Annotations trustplane's control plane records on the objects it publishes (re-exported
// for gateways that embed this package and read the objects themselves).
const (
	// ScopeAnnotation holds the scope an object covers, e.g. "namespaces=*;
	// version-annotation=nginx.ingress.kubernetes.io/version": Published.Scope.
	ScopeAnnotation = checksum.ScopeAnnotation
	// IDsOmittedAnnotation marks an object whose spec.ids were left out (too many to
	// fit): Published.IDsOmitted.
	IDsOmittedAnnotation = checksum.IDsOmittedAnnotation
	// RemoveUnversionedAnnotation "true" on a Secret that lost its version annotation
	// confirms that its last verified files may go: until then (or until the Secret is
	// deleted) a data plane keeps serving them, as losing the annotation is usually a
	// careless edit, not a decision.
	RemoveUnversionedAnnotation = tenginev1alpha1.RemoveUnversionedAnnotation
)

// ScopeOf is the scope string of a data plane that watches namespaces (none: every
// namespace, Tengine-Ingress's default) and reads versions from versionAnnotation, in the
// form the control plane records in ScopeAnnotation.
func ScopeOf(namespaces []string, versionAnnotation string) string {
	return checksum.NewScope(namespaces, versionAnnotation).String()
}

// Published is one SecretCheckSum (or IngressCheckSum) as the data plane sees it.
type Published struct {
	// Name identifies the object in verdicts (the agent uses namespace/name).
	Name     string
	Checksum string
	IDs      []string
	Created  time.Time
	// Scope is the object's ScopeAnnotation; empty when it has none (published by
	// something other than trustplane), which makes it a candidate for every scope.
	Scope string
	// IDsOmitted says the publisher left spec.ids out (IDsOmittedAnnotation): the checksum
	// holds, but there is nothing to diff against.
	IDsOmitted bool
}

// Verdict is the outcome of comparing the local view with the published checksums.
type Verdict struct {
	// Trusted says the local secrets may be used.
	Trusted bool
	// Reason is Match, NoChecksumFailOpen, NoChecksumFailClosed, Mismatch or ScopeMismatch.
	Reason string
	// Checksum is the local checksum.
	Checksum string
	// Against is the object that matched, or the newest one a distrust is reported against.
	Against string
	// AgainstScope is Against's Scope (for ScopeMismatch: what it covers instead).
	AgainstScope string
	// LocalOnly and PublishedOnly are the exact differing IDs of a Mismatch.
	LocalOnly, PublishedOnly []string
	// IDsOmitted says Against published no IDs: a Mismatch without a diff.
	IDsOmitted bool
}

// Verdict reasons.
const (
	Match                = "Match"
	Mismatch             = "Mismatch"
	NoChecksumFailOpen   = "NoChecksumFailOpen"
	NoChecksumFailClosed = "NoChecksumFailClosed"
	// ScopeMismatch: checksums are published, none matches, and none covers what this data
	// plane watches, so no diff could explain anything: the two sides are configured for
	// different namespaces (or version annotations). It is also the reason of the agent's
	// event that says so.
	ScopeMismatch = tenginev1alpha1.ReasonScopeMismatch
)

// Decide compares local IDs with the published checksums the way Tengine-Ingress does:
// trusted when *any* published checksum equals the local one. Otherwise the IDs are
// diffed against the newest object (by creation time) among those covering scope, the
// data plane's own (ScopeOf); objects covering another scope are never diffed against,
// and when only such exist the verdict is ScopeMismatch. An empty scope makes every
// object a candidate. With nothing published, failOpen decides (Tengine is fail-open).
func Decide(scope string, localIDs []string, published []Published, failOpen bool) Verdict {
	v := Verdict{Checksum: checksum.Sum(localIDs)}
	if len(published) == 0 {
		v.Trusted, v.Reason = failOpen, NoChecksumFailClosed
		if failOpen {
			v.Reason = NoChecksumFailOpen
		}
		return v
	}
	for _, p := range published {
		if p.Checksum == v.Checksum {
			v.Trusted, v.Reason, v.Against, v.AgainstScope = true, Match, p.Name, p.Scope
			return v
		}
	}
	var candidates []Published
	for _, p := range published {
		if sameScope(scope, p.Scope) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		newest := newestOf(published)
		v.Reason, v.Against, v.AgainstScope = ScopeMismatch, newest.Name, newest.Scope
		return v
	}
	newest := newestOf(candidates)
	v.Reason, v.Against, v.AgainstScope = Mismatch, newest.Name, newest.Scope
	if newest.IDsOmitted {
		v.IDsOmitted = true
		return v
	}
	v.LocalOnly, v.PublishedOnly = checksum.Diff(localIDs, newest.IDs)
	return v
}

// newestOf is the object created last (ties broken by name, so the choice is stable).
func newestOf(published []Published) Published {
	newest := published[0]
	for _, p := range published[1:] {
		if p.Created.After(newest.Created) || (p.Created.Equal(newest.Created) && p.Name > newest.Name) {
			newest = p
		}
	}
	return newest
}

// sameScope says an object recording published covers what a data plane of scope own
// watches. Unknown on either side counts as the same (the data plane cannot tell); a
// recorded scope that does not parse (a label selector, say) covers something else.
func sameScope(own, published string) bool {
	if own == "" || published == "" || own == published {
		return true
	}
	theirs, err := checksum.ParseScope(published)
	if err != nil {
		return false
	}
	ours, err := checksum.ParseScope(own)
	return err == nil && ours.Equal(theirs)
}
