package kubeconfig

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
)

// Options configure the controller: its flags (AddFlags) and what it depends on.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// WorkersPerNamespace caps the reconciles of one namespace's requests at a time, so
	// one tenant's requests at a slow or dead target never take every worker: another
	// tenant's revocation still runs at once.
	WorkersPerNamespace int
	// RetryBaseDelay and RetryMaxDelay bound each request's own exponential backoff.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// Ceiling is the most any request may be granted.
	Ceiling access.Ceiling
	// RotateFraction of a credential's lifetime passes before it is rotated.
	RotateFraction float64
	// MaxExpiration is the longest lifetime a request may ask for: a leaked kubeconfig is
	// worth at most this long.
	MaxExpiration time.Duration

	// Garden is the Gardener project, nil without one: only brought-along Clusters work.
	Garden *garden.Garden
	// Kubeconfig is what a brought-along Cluster's kubeconfig may use: the policy the
	// cluster controller reads it with, built and validated once with the manager.
	Kubeconfig tenantkubeconfig.Policy
	// Targets are the connections to the Clusters' target clusters, shared with the
	// cluster controller (one connection per Cluster); nil: the controller makes its own.
	Targets *clustertarget.Connections
	// Clock is the time source of issuing and rotation.
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 32, WorkersPerNamespace: 4, RetryBaseDelay: 500 * time.Millisecond, RetryMaxDelay: 5 * time.Minute, Ceiling: access.DefaultCeiling(), RotateFraction: 2.0 / 3, MaxExpiration: 30 * 24 * time.Hour,
		Kubeconfig: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
}

// minExpiration is the shortest lifetime TokenRequest issues (and spec.expiration's minimum).
const minExpiration = 600 * time.Second

// Validate says, in one line, what is wrong with the flags: every flag is checked.
func (o *Options) Validate() error {
	if err := slots.ValidateFlags(Name, o.Workers, o.WorkersPerNamespace, o.RetryBaseDelay, o.RetryMaxDelay); err != nil {
		return err
	}
	if o.MaxExpiration < minExpiration {
		return fmt.Errorf("--kubeconfig-max-expiration=%s: must be at least %s, the shortest token lifetime", o.MaxExpiration, minExpiration)
	}
	if err := o.Ceiling.Validate(); err != nil {
		return fmt.Errorf("--kubeconfig-allowed-routes: %w", err)
	}
	for _, verb := range o.Ceiling.ForbiddenVerbs {
		if strings.TrimSpace(verb) == "" {
			return fmt.Errorf("--kubeconfig-forbidden-verbs=%q: an empty verb", strings.Join(o.Ceiling.ForbiddenVerbs, ","))
		}
	}
	for _, ns := range o.Ceiling.ProtectedNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--kubeconfig-protected-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	if !(o.RotateFraction > 0 && o.RotateFraction < 1) {
		return fmt.Errorf("--kubeconfig-rotate-fraction=%v: must be between 0 and 1 (exclusive)", o.RotateFraction)
	}
	return nil
}

// ceiling is the configured ceiling with TargetNamespace always protected: a pod there
// could mount any other request's ServiceAccount.
func (o *Options) ceiling() access.Ceiling {
	c := o.Ceiling
	c.ProtectedNamespaces = append(slices.Clone(c.ProtectedNamespaces), TargetNamespace)
	return c
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "kubeconfig-workers", o.Workers, "Concurrent KubeconfigRequest reconciles.")
	fs.IntVar(&o.WorkersPerNamespace, "kubeconfig-workers-per-namespace", o.WorkersPerNamespace, "Most concurrent reconciles of one namespace's KubeconfigRequests (at most --kubeconfig-workers), so one tenant's requests at unreachable clusters cannot hold the others'.")
	fs.DurationVar(&o.RetryBaseDelay, "kubeconfig-retry-base-delay", o.RetryBaseDelay, "First retry delay of a KubeconfigRequest after a failure; doubles with each further failure of that request.")
	fs.DurationVar(&o.RetryMaxDelay, "kubeconfig-retry-max-delay", o.RetryMaxDelay, "Longest retry delay of a KubeconfigRequest.")
	fs.StringSliceVar(&o.Ceiling.ForbiddenVerbs, "kubeconfig-forbidden-verbs", o.Ceiling.ForbiddenVerbs, "Verbs no KubeconfigRequest may be granted.")
	fs.BoolVar(&o.Ceiling.AllowSecrets, "kubeconfig-allow-secrets", o.Ceiling.AllowSecrets, "Allow KubeconfigRequests to be granted access to secrets and serviceaccounts/token.")
	fs.BoolVar(&o.Ceiling.AllowWildcardVerbs, "kubeconfig-allow-wildcard-verbs", o.Ceiling.AllowWildcardVerbs, `Allow the verb "*".`)
	fs.StringSliceVar(&o.Ceiling.Allow, "kubeconfig-allowed-routes", o.Ceiling.Allow, "Escalation routes KubeconfigRequests may be granted (refused by default): "+strings.Join(access.RouteNames(), ", ")+".")
	fs.StringSliceVar(&o.Ceiling.ProtectedNamespaces, "kubeconfig-protected-namespaces", o.Ceiling.ProtectedNamespaces,
		"Namespaces of target clusters where no KubeconfigRequest may exec into, attach to, port-forward to or create/change workloads ("+TargetNamespace+" is always protected).")
	fs.DurationVar(&o.MaxExpiration, "kubeconfig-max-expiration", o.MaxExpiration, "Longest spec.expiration a KubeconfigRequest may ask for; longer requests are refused (ExpirationTooLong).")
	fs.Float64Var(&o.RotateFraction, "kubeconfig-rotate-fraction", o.RotateFraction, "Rotate a credential once this fraction of its lifetime has passed.")
}
