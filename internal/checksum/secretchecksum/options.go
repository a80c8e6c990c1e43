package secretchecksum

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/api/conditions"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/manager"
)

const (
	// Name is the controller's name in --controllers.
	Name = "secret-checksum"
	// Help is the controller's line in --help.
	Help = "SecretCheckSum/IngressCheckSum: Tengine-Ingress secret global consistency, control plane"
	// ManagedByLabel marks the checksum objects this controller publishes; it only ever
	// deletes objects carrying it.
	ManagedByLabel = conditions.ManagedByLabel
	managedByValue = conditions.ManagedByValue
	// ScopeKindLabel says which kind of scope a published object belongs to ("cluster" or
	// "namespace"), so that the two never take each other's objects for leftovers.
	// Objects published before it existed were per namespace.
	ScopeKindLabel = tenginev1alpha1.ScopeKindLabel
	// ScopeAnnotation records, on each published object, which objects it covers.
	ScopeAnnotation = checksum.ScopeAnnotation
)

// ScopeKind is how the covered namespaces are grouped into checksums.
type ScopeKind string

const (
	// ScopeCluster is one checksum over every covered namespace together, as a
	// Tengine-Ingress without --watch-namespace computes it.
	ScopeCluster ScopeKind = "cluster"
	// ScopeNamespace is one checksum per namespace, as a Tengine-Ingress started with
	// --watch-namespace=<ns> computes it.
	ScopeNamespace ScopeKind = "namespace"
)

// defaultMaxObjectBytes keeps a published object well under etcd's default request limit
// (--max-request-bytes, 1.5 MiB): about 26,000 Secret IDs.
const defaultMaxObjectBytes = 1_400_000

// Options are the controller's flags.
type Options struct {
	// Scopes to publish: ScopeCluster, ScopeNamespace or both.
	Scopes []string
	// Namespaces to cover; empty means every namespace.
	Namespaces []string
	// PublishNamespace is where the cluster-scope checksums are published.
	PublishNamespace string
	// LabelSelector is the removed --secret-checksum-label-selector: set, it is an error.
	LabelSelector string
	// VersionAnnotation is the annotation holding an object's version.
	VersionAnnotation string
	// Ingresses also publishes IngressCheckSums.
	Ingresses bool
	// IngressClasses are the Tengine-Ingress class flags: only the Ingresses a
	// Tengine-Ingress started with them keeps are counted.
	IngressClasses checksum.IngressClassOptions
	// MaxObjectBytes is the largest published object; beyond it the IDs are omitted.
	MaxObjectBytes int
	// QuietPeriod and MaxDelay batch a burst of changes into one publication.
	QuietPeriod, MaxDelay time.Duration
	// Clock stamps publications.
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Scopes: []string{string(ScopeCluster)}, PublishNamespace: manager.OwnNamespace(),
		VersionAnnotation: checksum.DefaultVersionAnnotation, Ingresses: true, IngressClasses: checksum.DefaultIngressClassOptions(),
		MaxObjectBytes: defaultMaxObjectBytes, QuietPeriod: time.Second, MaxDelay: 10 * time.Second, Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Scopes, "secret-checksum-scopes", o.Scopes, "Checksums to publish: 'cluster' (one over every covered namespace, for Tengine-Ingress without --watch-namespace), 'namespace' (one per namespace, for --watch-namespace=<ns>), or both.")
	fs.StringSliceVar(&o.Namespaces, "secret-checksum-namespaces", o.Namespaces, "Namespaces whose TLS Secrets (and Ingresses) are covered; empty means all (Tengine-Ingress's default --watch-namespace).")
	fs.StringVar(&o.PublishNamespace, "secret-checksum-publish-namespace", o.PublishNamespace, "Namespace the cluster-scope checksums are published in; a Tengine-Ingress must watch it (default: the manager's own).")
	fs.StringVar(&o.LabelSelector, "secret-checksum-label-selector", "", "Removed: Tengine-Ingress has no label selector, so the checksum must cover every Secret it sees.")
	_ = fs.MarkHidden("secret-checksum-label-selector")
	fs.StringVar(&o.VersionAnnotation, "secret-checksum-version-annotation", o.VersionAnnotation, "Annotation holding an object's version (Tengine-Ingress also uses fs.ingress.alibaba/version).")
	fs.BoolVar(&o.Ingresses, "secret-checksum-ingresses", o.Ingresses, "Also publish IngressCheckSums.")
	o.IngressClasses.AddFlags(fs, "secret-checksum-")
	fs.IntVar(&o.MaxObjectBytes, "secret-checksum-max-object-bytes", o.MaxObjectBytes, "Largest published object; beyond it the IDs are left out of spec.ids (the checksum still holds) and a Warning says so. Keep it under etcd's --max-request-bytes.")
	fs.DurationVar(&o.QuietPeriod, "secret-checksum-quiet-period", o.QuietPeriod, "Changes are published once the scope has been quiet this long (a burst → one publication).")
	fs.DurationVar(&o.MaxDelay, "secret-checksum-max-delay", o.MaxDelay, "Longest a publication waits while changes keep coming.")
}

// Validate checks the options before anything connects.
func (o *Options) Validate() error {
	if o.LabelSelector != "" {
		return errors.New("--secret-checksum-label-selector was removed: Tengine-Ingress counts every versioned Secret it watches, so a narrower checksum never matches (see docs/checksum.md)")
	}
	if len(o.Scopes) == 0 {
		return errors.New("--secret-checksum-scopes: name at least one of cluster, namespace")
	}
	for _, s := range o.Scopes {
		if s != string(ScopeCluster) && s != string(ScopeNamespace) {
			return fmt.Errorf("--secret-checksum-scopes: %q is neither cluster nor namespace", s)
		}
	}
	if o.publishes(ScopeCluster) && o.PublishNamespace == "" {
		return errors.New("--secret-checksum-publish-namespace is required for the cluster scope")
	}
	if o.publishes(ScopeCluster) && len(o.Namespaces) > 0 && !slices.Contains(o.Namespaces, o.PublishNamespace) {
		return fmt.Errorf("--secret-checksum-publish-namespace=%s is not among --secret-checksum-namespaces: a Tengine-Ingress watching only those would never see the checksum", o.PublishNamespace)
	}
	if len(o.IngressClasses.IngressClass) > maxKeptClassBytes {
		return fmt.Errorf("--secret-checksum-ingress-class is %d bytes long: an ingress class is at most %d", len(o.IngressClasses.IngressClass), maxKeptClassBytes)
	}
	if o.MaxObjectBytes < 1024 {
		return fmt.Errorf("--secret-checksum-max-object-bytes=%d: too small to hold even the checksum", o.MaxObjectBytes)
	}
	return nil
}

func (o *Options) publishes(kind ScopeKind) bool { return slices.Contains(o.Scopes, string(kind)) }
