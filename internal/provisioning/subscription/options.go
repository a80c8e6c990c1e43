package subscription

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
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
	// ReleaseShootTimeout is how long a deleted request's credential waits for the
	// request's own Shoot to go before it is released anyway (marked dirty only if no
	// other Shoot or request uses it), as kyma-environment-broker's shootWaitTimeout.
	ReleaseShootTimeout time.Duration
	// Clock is the time source of that timeout.
	Clock clock.PassiveClock
	// MultiAccountGlobalAccounts are the global accounts that may hold several dedicated
	// credentials of a provider ("*": every account; empty: none, one credential per
	// account and provider), as kyma-environment-broker's
	// hap.multiHyperscalerAccount.allowedGlobalAccounts.
	MultiAccountGlobalAccounts []string
	// MultiAccountLimits is how many users (SubscriptionRequests and Shoots) one
	// credential of such an account serves before another is claimed, by provider, with
	// "default" for the providers not listed (KEB's limits.default and limits.<provider>).
	// Unset: no limit.
	MultiAccountLimits map[string]string
	// DirtyQuotaPerNamespace is how many dirty credentials claimed from one namespace
	// stop that namespace's requests from claiming more, until they are handed back: a
	// namespace that deletes and recreates its requests leaves one dirty credential per
	// cycle and would drain the pool. 0: no quota.
	DirtyQuotaPerNamespace int
}

// multiAccountLimit is the users per credential of a multi-account tenant on provider:
// 0 when tenant holds one credential per provider (not listed), else its limit
// (unlimited: a number too large to reach).
func (o *Options) multiAccountLimit(tenant, provider string) int {
	if tenant == "" || !credentialpool.Granted(strings.Join(o.MultiAccountGlobalAccounts, ","), tenant) {
		return 0
	}
	for _, key := range []string{provider, "default"} {
		if v, ok := o.MultiAccountLimits[key]; ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return unlimited
}

// unlimited is KEB's default limit: no account reaches it.
const unlimited = 999999

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Pool: PoolAuto, PoolNamespace: DefaultPoolNamespace, ReleaseShootTimeout: time.Hour, Clock: clock.RealClock{}, DirtyQuotaPerNamespace: 5}
}

// AddFlags registers the options as flags. The garden's are the cluster controller's (it
// registers them).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Pool, "subscription-pool", o.Pool, "Where the credential pool is: 'garden' (CredentialsBindings in --garden-namespace), "+
		"'secrets' (labelled Secrets in --subscription-pool-namespace; for tests and small setups), or 'auto' (garden when --garden-kubeconfig is set).")
	fs.StringVar(&o.PoolNamespace, "subscription-pool-namespace", o.PoolNamespace, "Namespace of the management cluster holding the Secret pool (--subscription-pool=secrets); "+
		"tenants must not be able to write Secrets there.")
	fs.StringSliceVar(&o.MultiAccountGlobalAccounts, "subscription-multi-account-global-accounts", o.MultiAccountGlobalAccounts, "Global accounts that may hold several dedicated credentials of a provider, each serving at most --subscription-multi-account-limits users before another is claimed ('*': every account; empty: one credential per account and provider), as kyma-environment-broker's multiHyperscalerAccount.")
	fs.StringToStringVar(&o.MultiAccountLimits, "subscription-multi-account-limits", o.MultiAccountLimits, "Users (SubscriptionRequests and Shoots) per credential of such an account, by provider, e.g. default=10,aws=5; the most-used credential below its limit is filled first. Unset: no limit.")
	fs.IntVar(&o.DirtyQuotaPerNamespace, "subscription-dirty-quota-per-namespace", o.DirtyQuotaPerNamespace, "Dirty credentials claimed from one namespace that stop its requests from claiming more until they are handed back (a namespace deleting and recreating requests leaves one dirty credential per cycle); 0: no quota.")
	fs.DurationVar(&o.ReleaseShootTimeout, "subscription-release-shoot-timeout", o.ReleaseShootTimeout, "How long a deleted SubscriptionRequest's dedicated credential waits for the request's own Shoot to be gone; then it is released anyway, and marked dirty only if no other Shoot or request uses it (kyma-environment-broker's shootWaitTimeout).")
}

// Validate checks every flag, naming the flag at fault.
func (o *Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.PoolNamespace); len(errs) > 0 {
		return fmt.Errorf("--subscription-pool-namespace=%q: not a namespace name: %s", o.PoolNamespace, strings.Join(errs, "; "))
	}
	for key, v := range o.MultiAccountLimits {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("--subscription-multi-account-limits: %s=%q is not a positive number of users per credential", key, v)
		}
	}
	if o.DirtyQuotaPerNamespace < 0 {
		return fmt.Errorf("--subscription-dirty-quota-per-namespace must not be negative, not %d", o.DirtyQuotaPerNamespace)
	}
	if o.ReleaseShootTimeout < 0 {
		return fmt.Errorf("--subscription-release-shoot-timeout must not be negative, not %v", o.ReleaseShootTimeout)
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
