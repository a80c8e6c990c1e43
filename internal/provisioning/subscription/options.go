package subscription

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trustplane/trustplane/internal/provisioning/garden"
)

// Options configure the controller: its flags (AddFlags), and the garden the manager is
// connected to.
type Options struct {
	// Pool is where the credential pool is (--subscription-pool): PoolGarden, PoolSecrets,
	// or PoolAuto (PoolGarden when Garden is set, else PoolSecrets).
	Pool string
	// PoolNamespace is the namespace of the management cluster holding the Secret pool
	// (--subscription-pool-namespace); tenants must not be able to write Secrets there.
	// Its own requests are the operator's, which need no grant of global accounts.
	PoolNamespace string
	// Garden is the garden (nil: no garden). With PoolGarden, or PoolAuto, the pool is its
	// project's CredentialsBindings, and the project's Shoots count as their users.
	Garden *garden.Garden
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Pool: PoolAuto, PoolNamespace: DefaultPoolNamespace}
}

// AddFlags registers the options as flags. The garden's are the cluster controller's (it
// registers them).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Pool, "subscription-pool", o.Pool, "Where the credential pool is: 'garden' (CredentialsBindings in --garden-namespace), "+
		"'secrets' (labelled Secrets in --subscription-pool-namespace; for tests and small setups), or 'auto' (garden when --garden-kubeconfig is set).")
	fs.StringVar(&o.PoolNamespace, "subscription-pool-namespace", o.PoolNamespace, "Namespace of the management cluster holding the Secret pool (--subscription-pool=secrets); "+
		"tenants must not be able to write Secrets there.")
}

// Validate checks every flag, naming the flag at fault.
func (o *Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.PoolNamespace); len(errs) > 0 {
		return fmt.Errorf("--subscription-pool-namespace=%q: not a namespace name: %s", o.PoolNamespace, strings.Join(errs, "; "))
	}
	switch o.Pool {
	case PoolGarden:
		if o.Garden == nil {
			return errors.New("--subscription-pool=garden needs --garden-kubeconfig")
		}
	case PoolSecrets, PoolAuto:
	default:
		return fmt.Errorf("--subscription-pool=%q: want garden, secrets or auto", o.Pool)
	}
	return nil
}
