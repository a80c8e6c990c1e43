package cli

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/aggregation/clusterroleaggregation"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/checksum/secretchecksum"
	"github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/podcert/tlsexpiry"
	"github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/subscription"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
)

// controllers is every controller `trustplane manager` knows, in start order. Each is
// registered the same way (register): its package's Name, Help, Options with their
// AddFlags, and Setup(mgr, Options); what it depends on besides its flags is filled into
// its Options just before Setup, from deps.
func controllers(deps *dependencies) []manager.Controller {
	jwksOpts := jwks.DefaultOptions()
	clusterRoleOpts := clusterroleaggregation.DefaultOptions()
	roleOpts := roleaggregation.DefaultOptions()
	checksumOpts := secretchecksum.DefaultOptions()
	signerOpts := podcertsigner.DefaultOptions()
	expiryOpts := tlsexpiry.DefaultOptions()
	kubeconfigOpts := kubeconfig.DefaultOptions()
	clusterOpts := cluster.DefaultOptions()
	subscriptionOpts := subscription.DefaultOptions()
	return []manager.Controller{
		register(jwks.Name, jwks.Help, jwks.Collectors(), &jwksOpts, jwks.Setup),
		register(clusterroleaggregation.Name, clusterroleaggregation.Help, nil, &clusterRoleOpts, clusterroleaggregation.Setup),
		register(roleaggregation.Name, roleaggregation.Help, nil, &roleOpts, roleaggregation.Setup),
		register(secretchecksum.Name, secretchecksum.Help, secretchecksum.Collectors(), &checksumOpts, secretchecksum.Setup),
		register(podcertsigner.Name, podcertsigner.Help, podcertsigner.Collectors(), &signerOpts, podcertsigner.Setup),
		register(tlsexpiry.Name, tlsexpiry.Help, tlsexpiry.Collectors(), &expiryOpts, tlsexpiry.Setup),
		register(kubeconfig.Name, kubeconfig.Help, kubeconfig.Collectors(), &kubeconfigOpts, kubeconfig.Setup, func(mgr ctrl.Manager, o *kubeconfig.Options) (err error) {
			o.Garden, o.Targets, err = deps.clusterTargets(mgr)
			o.Kubeconfig = deps.policy
			return err
		}),
		register(cluster.Name, cluster.Help, cluster.Collectors(), &clusterOpts, cluster.Setup, func(mgr ctrl.Manager, o *cluster.Options) (err error) {
			o.Garden, o.Targets, err = deps.clusterTargets(mgr)
			o.Kubeconfig = deps.policy
			return err
		}),
		register(subscription.Name, subscription.Help, subscription.Collectors(), &subscriptionOpts, subscription.Setup, func(mgr ctrl.Manager, o *subscription.Options) (err error) {
			o.Garden, err = deps.garden(mgr)
			return err
		}),
	}
}

// options is a controller's Options: a struct whose pointer binds its flags and checks
// them (Validate runs once the flags and --config are read, before the manager is built).
type options[O any] interface {
	*O
	AddFlags(fs *pflag.FlagSet)
	Validate() error
}

// register is the registry entry of one controller. opts holds the parsed flags by the
// time Setup runs; collectors are its package's Collectors(), registered by the manager
// when the controller runs; inject fills in the dependencies (garden, policy) before setup.
func register[O any, P options[O], R any](name, help string, collectors []prometheus.Collector, opts P, setup func(ctrl.Manager, O) (R, error), inject ...func(ctrl.Manager, P) error) manager.Controller {
	return manager.Controller{
		Name:       name,
		Help:       help,
		Collectors: collectors,
		AddFlags:   opts.AddFlags,
		Validate:   opts.Validate,
		Setup: func(mgr ctrl.Manager) error {
			for _, fill := range inject {
				if err := fill(mgr, opts); err != nil {
					return err
				}
			}
			_, err := setup(mgr, *opts)
			return err
		},
	}
}

// dependencies are what several controllers share, bound to flags once and made once per
// manager: the garden connection (cluster, kubeconfig and subscription controllers), and
// for the two that reach Clusters' target clusters the tenant kubeconfig policy, the
// clustertarget field indexes and one cache of connections to the targets (one
// connection per Cluster, whichever controller dials first).
type dependencies struct {
	gardenOpts *garden.Options
	policy     tenantkubeconfig.Policy

	mgr        ctrl.Manager // the manager the rest was made for
	connected  *garden.Garden
	gardenErr  error
	indexed    bool
	indexesErr error
	targets    *clustertarget.Connections
}

func newDependencies() *dependencies {
	return &dependencies{gardenOpts: garden.DefaultOptions(), policy: tenantkubeconfig.DefaultPolicy()}
}

// garden is mgr's garden, nil without --garden-kubeconfig, connected on first use.
func (d *dependencies) garden(mgr ctrl.Manager) (*garden.Garden, error) {
	d.forManager(mgr)
	if d.connected == nil && d.gardenErr == nil {
		d.connected, d.gardenErr = d.gardenOpts.Connect(mgr)
	}
	return d.connected, d.gardenErr
}

// clusterTargets readies what reaching a Cluster's target takes: the policy is valid and
// the clustertarget indexes are registered with mgr (once, whichever controller asks
// first). It returns the garden and the manager's one cache of target connections.
func (d *dependencies) clusterTargets(mgr ctrl.Manager) (*garden.Garden, *clustertarget.Connections, error) {
	d.forManager(mgr)
	if err := d.policy.Validate(); err != nil {
		return nil, nil, err
	}
	if !d.indexed {
		d.indexed, d.indexesErr = true, clustertarget.AddIndexes(context.Background(), mgr)
	}
	if d.indexesErr != nil {
		return nil, nil, fmt.Errorf("registering the cluster target indexes: %w", d.indexesErr)
	}
	g, err := d.garden(mgr)
	if err != nil {
		return nil, nil, err
	}
	if d.targets == nil {
		d.targets = &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Garden: g, Policy: d.policy, Clock: clock.RealClock{}}
	}
	return g, d.targets, nil
}

// forManager starts afresh for a manager other than the one the dependencies were made
// for (a command builds one manager; tests may build several).
func (d *dependencies) forManager(mgr ctrl.Manager) {
	if d.mgr != mgr {
		*d = dependencies{gardenOpts: d.gardenOpts, policy: d.policy, mgr: mgr}
	}
}
