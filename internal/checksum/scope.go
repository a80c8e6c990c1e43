package checksum

import (
	"fmt"
	"slices"
	"strings"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

// Annotations trustplane records on the checksum objects it publishes (api/tengine/v1alpha1).
const (
	// ScopeAnnotation holds the Scope a published object covers (Scope.String).
	ScopeAnnotation = tenginev1alpha1.ScopeAnnotation
	// IDsOmittedAnnotation is set when the IDs did not fit in one object.
	IDsOmittedAnnotation = tenginev1alpha1.IDsOmittedAnnotation
)

// Scope is what one published checksum covers: the objects of some namespaces (every
// namespace when Namespaces is empty) whose version is read from VersionAnnotation.
// A Tengine-Ingress started with --watch-namespace=X checks against Scope{[X], ...};
// one started without it, against Scope{nil, ...}.
type Scope struct {
	// Namespaces covered, sorted; empty means every namespace.
	Namespaces []string
	// VersionAnnotation is the annotation versions are read from.
	VersionAnnotation string
}

// NewScope returns the scope of the given namespaces (sorted, deduplicated; none means
// every namespace).
func NewScope(namespaces []string, versionAnnotation string) Scope {
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	return Scope{Namespaces: slices.Compact(ns), VersionAnnotation: versionAnnotation}
}

// AllNamespaces says the scope covers every namespace.
func (s Scope) AllNamespaces() bool { return len(s.Namespaces) == 0 }

// Covers says whether objects of namespace ns are counted.
func (s Scope) Covers(ns string) bool {
	_, found := slices.BinarySearch(s.Namespaces, ns)
	return s.AllNamespaces() || found
}

// String is the form recorded in ScopeAnnotation, e.g.
// "namespaces=*; version-annotation=nginx.ingress.kubernetes.io/version".
func (s Scope) String() string {
	ns := "*"
	if !s.AllNamespaces() {
		ns = strings.Join(s.Namespaces, ",")
	}
	return fmt.Sprintf("namespaces=%s; version-annotation=%s", ns, s.VersionAnnotation)
}

// Equal says two scopes count the same objects.
func (s Scope) Equal(o Scope) bool {
	return slices.Equal(s.Namespaces, o.Namespaces) && s.VersionAnnotation == o.VersionAnnotation
}

// ParseScope reads ScopeAnnotation. Objects published before label selectors were
// removed carry "selector=": an empty one is the same scope, any other is an error (no
// data plane can see the same objects).
func ParseScope(raw string) (Scope, error) {
	var s Scope
	seen := map[string]bool{}
	for _, part := range strings.Split(raw, ";") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Scope{}, fmt.Errorf("scope %q: %q is not key=value", raw, part)
		}
		seen[key] = true
		switch key {
		case "namespaces":
			if value != "*" {
				s = NewScope(strings.Split(value, ","), s.VersionAnnotation)
			}
		case "version-annotation":
			s.VersionAnnotation = value
		case "selector":
			if value != "" {
				return Scope{}, fmt.Errorf("scope %q: covers only objects matching label selector %q", raw, value)
			}
		default:
			return Scope{}, fmt.Errorf("scope %q: unknown key %q", raw, key)
		}
	}
	if !seen["namespaces"] || !seen["version-annotation"] {
		return Scope{}, fmt.Errorf("scope %q: wants namespaces= and version-annotation=", raw)
	}
	return s, nil
}
