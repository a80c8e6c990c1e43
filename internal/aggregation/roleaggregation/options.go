package roleaggregation

import (
	"fmt"

	"github.com/spf13/pflag"
)

const (
	// Name is the controller's name in --controllers.
	Name = "role-aggregation"
	// Help is the controller's one-line description in --help.
	Help = "Role annotated " + SelectorAnnotation + " → rules of matching Roles in its namespace"
)

// Options are the controller's flags.
type Options struct {
	// Workers is the number of concurrent syncs.
	Workers int
	// TrustRoleAuthors aggregates without the admission policy: the operator vouches that
	// whoever may set the annotation may also escalate Roles.
	TrustRoleAuthors bool
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Workers: 2}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "role-aggregation-workers", o.Workers, "Concurrent Role aggregation syncs.")
	fs.BoolVar(&o.TrustRoleAuthors, "role-aggregation-trust-role-authors", o.TrustRoleAuthors,
		"Aggregate even without the ValidatingAdmissionPolicy "+PolicyName+": only where everyone who may edit Roles may also escalate them.")
}

// Validate checks the options before anything connects.
func (o Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--role-aggregation-workers must be positive, not %d", o.Workers)
	}
	return nil
}
