package clusterroleaggregation

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

const (
	// Name is the controller's name in --controllers (and upstream's).
	Name = "clusterrole-aggregation"
	// Help is the controller's one-line description in --help.
	Help = "ClusterRole aggregationRule → rules, as kube-controller-manager does it"
)

// Options configure the controller: its flags, and the clock tests may inject.
type Options struct {
	// Workers is the number of concurrent syncs (upstream runs 5).
	Workers int
	// QuietPeriod is how long an aggregator's inputs must stay unchanged before it syncs,
	// so that a burst of changes costs one sync and at most one write.
	QuietPeriod time.Duration
	// MaxDelay bounds how long continuous changes can hold a sync back.
	MaxDelay time.Duration
	// Clock times QuietPeriod and MaxDelay (nil: the real clock).
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults. A quiet second lets a whole level of aggregators
// write before the aggregators that select them sync (200ms wrote intermediate states);
// a max delay shorter than a long burst forces a write per aggregator per max delay,
// which is what a slowed-down `make bench-aggregation` showed at 10s.
func DefaultOptions() Options {
	return Options{Workers: 5, QuietPeriod: time.Second, MaxDelay: 30 * time.Second, Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "clusterrole-aggregation-workers", o.Workers, "Concurrent ClusterRole aggregation syncs.")
	fs.DurationVar(&o.QuietPeriod, "clusterrole-aggregation-quiet-period", o.QuietPeriod, "How long an aggregator's inputs must be unchanged before it syncs (bursts cost one sync).")
	fs.DurationVar(&o.MaxDelay, "clusterrole-aggregation-max-delay", o.MaxDelay, "Longest a sync waits while its inputs keep changing.")
}

// Validate checks the options before anything connects.
func (o Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--clusterrole-aggregation-workers must be positive, not %d", o.Workers)
	}
	return nil
}
