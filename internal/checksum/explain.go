package checksum

import (
	"fmt"
	"sort"
	"strings"
)

// Local is one object of the cluster as the checksum counts it: its ID, or why it is
// left out (then ID is "").
type Local struct {
	// Object names it, e.g. "web/site-27555".
	Object  string
	ID      string
	LeftOut *LeftOut
	// PemSHA is a Secret's certificate fingerprint (SecretPemSHA) when it has one, also
	// when it is left out: it tells which object a published ID was.
	PemSHA string
}

// Sides of a Difference.
const (
	// OnlyInCluster: the cluster's objects count the ID, the published object does not.
	OnlyInCluster = "cluster"
	// OnlyPublished: the published object counts the ID, the cluster's objects do not.
	OnlyPublished = "published"
)

// Difference is one ID on which the cluster's objects and a published checksum disagree,
// with the object it belongs to and why.
type Difference struct {
	ID string
	// Side is OnlyInCluster or OnlyPublished.
	Side string
	// Objects are the objects of the cluster with the ID's numeric ID (none: "").
	Objects []string
	// Why says what changed, in words.
	Why string
}

// Explain words the differences Diff found (localOnly, publishedOnly) with the objects of
// the cluster they belong to: an ID on both sides with the same numeric ID is one object
// that changed (its version, or its certificate: the PemSHA of "<id>-<version>-<PemSHA>");
// an ID only published belongs to an object left out (and why) or to none; one only in
// the cluster was not published yet. Ordered by numeric ID, then side.
func Explain(localOnly, publishedOnly []string, locals []Local) []Difference {
	byNumber := map[string][]Local{}
	for _, l := range locals {
		n := ""
		if l.ID != "" {
			n = numberOf(l.ID)
		} else if id, err := NameID(nameOf(l.Object)); err == nil {
			n = id
		}
		if n != "" {
			byNumber[n] = append(byNumber[n], l)
		}
	}
	published := map[string][]string{}
	for _, id := range publishedOnly {
		published[numberOf(id)] = append(published[numberOf(id)], id)
	}
	cluster := map[string][]string{}
	for _, id := range localOnly {
		cluster[numberOf(id)] = append(cluster[numberOf(id)], id)
	}
	var out []Difference
	for _, id := range localOnly {
		d := Difference{ID: id, Side: OnlyInCluster, Objects: objectsWithID(byNumber[numberOf(id)], id)}
		if before := published[numberOf(id)]; len(before) == 1 {
			d.Why = changed(before[0], id)
		} else {
			d.Why = "not in the published checksum: created, made valid or changed after it was published"
		}
		out = append(out, d)
	}
	for _, id := range publishedOnly {
		n := numberOf(id)
		d := Difference{ID: id, Side: OnlyPublished}
		if now := cluster[n]; len(now) == 1 && len(published[n]) == 1 {
			d.Objects, d.Why = objectsWithID(byNumber[n], now[0]), "replaced in the cluster by "+now[0]
			out = append(out, d)
			continue
		}
		candidates := sameCertificate(byNumber[n], id)
		d.Objects = names(candidates)
		switch gone := leftOut(candidates); {
		case len(gone) > 0:
			var why []string
			for _, l := range gone {
				why = append(why, fmt.Sprintf("%s is left out (%s: %s)", l.Object, l.LeftOut.Reason, l.LeftOut.Message))
			}
			d.Why = strings.Join(why, "; ")
		case len(candidates) == 0:
			d.Why = "no object with numeric ID " + n + " in the cluster: deleted, renamed, or outside the scope"
		default:
			d.Why = "published, and no longer counted in the cluster"
		}
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := numberOf(out[i].ID), numberOf(out[j].ID)
		if a != b {
			if len(a) != len(b) {
				return len(a) < len(b)
			}
			return a < b
		}
		return out[i].Side < out[j].Side
	})
	return out
}

// changed says how the published ID was and the cluster's is of one object.
func changed(was, is string) string {
	wasParts, isParts := strings.SplitN(was, "-", 3), strings.SplitN(is, "-", 3)
	var what []string
	if len(wasParts) >= 2 && len(isParts) >= 2 && wasParts[1] != isParts[1] {
		what = append(what, fmt.Sprintf("version %s in the cluster, %s published", isParts[1], wasParts[1]))
	}
	if len(wasParts) == 3 && len(isParts) == 3 && wasParts[2] != isParts[2] {
		what = append(what, fmt.Sprintf("certificate changed (SHA-1 %s in the cluster, %s published)", short(isParts[2]), short(wasParts[2])))
	}
	if len(what) == 0 {
		return "changed since it was published (was " + was + ")"
	}
	return strings.Join(what, "; ")
}

func short(sha string) string {
	if sha == "" {
		return "none: CA only"
	}
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}

// numberOf is the numeric ID an ID starts with.
func numberOf(id string) string {
	n, _, _ := strings.Cut(id, "-")
	return n
}

// nameOf is the name of "namespace/name" (or of a bare name).
func nameOf(object string) string {
	return object[strings.LastIndexByte(object, '/')+1:]
}

// sameCertificate narrows the objects of a published ID's numeric ID to those whose
// certificate is the ID's (its PemSHA), when some are.
func sameCertificate(locals []Local, id string) []Local {
	parts := strings.SplitN(id, "-", 3)
	if len(parts) < 3 || parts[2] == "" {
		return locals
	}
	var same []Local
	for _, l := range locals {
		if l.PemSHA == parts[2] {
			same = append(same, l)
		}
	}
	if len(same) == 0 {
		return locals
	}
	return same
}

func objectsWithID(locals []Local, id string) []string {
	var out []string
	for _, l := range locals {
		if l.ID == id {
			out = append(out, l.Object)
		}
	}
	return out
}

func leftOut(locals []Local) []Local {
	var out []Local
	for _, l := range locals {
		if l.LeftOut != nil {
			out = append(out, l)
		}
	}
	return out
}

func names(locals []Local) []string {
	var out []string
	for _, l := range locals {
		out = append(out, l.Object)
	}
	return out
}
