package cli

import (
	"github.com/trustplane/trustplane/internal/controller/cluster"
	"github.com/trustplane/trustplane/internal/controller/clusterroleaggregation"
	"github.com/trustplane/trustplane/internal/controller/jwks"
	"github.com/trustplane/trustplane/internal/controller/kubeconfig"
	"github.com/trustplane/trustplane/internal/controller/podcertsigner"
	"github.com/trustplane/trustplane/internal/controller/roleaggregation"
	"github.com/trustplane/trustplane/internal/controller/secretchecksum"
	"github.com/trustplane/trustplane/internal/controller/subscription"
	"github.com/trustplane/trustplane/internal/controller/tlsexpiry"
	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/manager"
)

// controllers is every controller `trustplane manager` knows, in start order.
func controllers() []manager.Controller {
	gardenOpts := garden.DefaultOptions() // shared by the cluster, kubeconfig and subscription controllers
	return []manager.Controller{
		jwks.Controller(),
		clusterroleaggregation.Controller(),
		roleaggregation.Controller(),
		secretchecksum.Controller(),
		podcertsigner.Controller(),
		tlsexpiry.Controller(),
		kubeconfig.Controller(gardenOpts),
		cluster.Controller(gardenOpts),
		subscription.Controller(gardenOpts),
	}
}
