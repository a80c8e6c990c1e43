package cluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
)

// Options configure the controller: its flags (AddFlags) and what it depends on.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// WorkersPerNamespace caps the reconciles of one namespace's Clusters at a time, so
	// one tenant's slow or dead targets can never take every worker from the others.
	WorkersPerNamespace int
	// RetryBaseDelay and RetryMaxDelay bound each Cluster's own exponential backoff.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// DeletionCleanupTimeout is how long a deleted brought-along Cluster keeps trying to
	// remove its administrators' bindings from a cluster that cannot be reached.
	DeletionCleanupTimeout time.Duration

	// Garden is the Gardener project, nil without one: only brought-along Clusters work.
	Garden *garden.Garden
	// Kubeconfig is what a brought-along kubeconfig may use: the policy the kubeconfig
	// controller reads it with too, built once with the manager.
	Kubeconfig tenantkubeconfig.Policy
	// Targets are the connections to the Clusters' target clusters, shared with the
	// kubeconfig controller (one connection per Cluster); nil: the controller makes its own.
	Targets *clustertarget.Connections
	// Clock is the time source of the deletion cleanup deadline.
	Clock clock.PassiveClock
	// LandscapeNamespace is where the landscape's ConfigMap for admission is published
	// (--cluster-landscape-namespace); empty: the manager's own namespace.
	LandscapeNamespace string
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 8, WorkersPerNamespace: 4, RetryBaseDelay: time.Second, RetryMaxDelay: 5 * time.Minute,
		DeletionCleanupTimeout: 5 * time.Minute, Kubeconfig: tenantkubeconfig.DefaultPolicy(), Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "cluster-workers", o.Workers, "Concurrent Cluster reconciles.")
	fs.IntVar(&o.WorkersPerNamespace, "cluster-workers-per-namespace", o.WorkersPerNamespace, "Most concurrent reconciles of one namespace's Clusters (at most --cluster-workers), so one tenant's unreachable clusters cannot hold the others'.")
	fs.DurationVar(&o.RetryBaseDelay, "cluster-retry-base-delay", o.RetryBaseDelay, "First retry delay of a Cluster after a failure; doubles with each further failure of that Cluster.")
	fs.DurationVar(&o.RetryMaxDelay, "cluster-retry-max-delay", o.RetryMaxDelay, "Longest retry delay of a Cluster.")
	fs.StringVar(&o.LandscapeNamespace, "cluster-landscape-namespace", o.LandscapeNamespace, "Namespace in which the leader publishes the ConfigMap "+operatorv1alpha1.LandscapeConfigMap+
		" (with a garden), the parameter of the admission policy trustplane-cluster-versions; empty: the manager's own namespace, where the shipped policy binding looks.")
	fs.DurationVar(&o.DeletionCleanupTimeout, "cluster-deletion-cleanup-timeout", o.DeletionCleanupTimeout, "How long a deleted brought-along Cluster keeps trying to remove its administrators' bindings from a cluster it cannot reach before it goes anyway (with a Warning event).")
}

// Validate checks every flag, in one line naming the flag at fault.
func (o *Options) Validate() error {
	if err := slots.ValidateFlags(Name, o.Workers, o.WorkersPerNamespace, o.RetryBaseDelay, o.RetryMaxDelay); err != nil {
		return err
	}
	if o.DeletionCleanupTimeout < 0 {
		return fmt.Errorf("--cluster-deletion-cleanup-timeout must not be negative, not %v", o.DeletionCleanupTimeout)
	}
	if errs := validation.IsDNS1123Label(o.LandscapeNamespace); o.LandscapeNamespace != "" && len(errs) > 0 {
		return fmt.Errorf("--cluster-landscape-namespace=%q: not a namespace name: %s", o.LandscapeNamespace, strings.Join(errs, "; "))
	}
	return o.Kubeconfig.Validate()
}
