package cli

import (
	goflag "flag"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/internal/manager"
)

func newManagerCommand() *cobra.Command {
	known := controllers()
	opts := manager.DefaultOptions()
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers (all of them by default; see --controllers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			// Select before connecting, so a typo in --controllers fails at once.
			if _, err := manager.Select(known, opts.Controllers); err != nil {
				return err
			}
			cfg, err := config.GetConfig()
			if err != nil {
				return err
			}
			mgr, err := manager.New(cfg, opts, known)
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	opts.AddFlags(cmd.Flags(), known)
	for _, c := range known {
		if c.AddFlags != nil {
			c.AddFlags(cmd.Flags())
		}
	}
	goflags := goflag.NewFlagSet("manager", goflag.ContinueOnError)
	config.RegisterFlags(goflags)
	zapOpts.BindFlags(goflags)
	cmd.Flags().AddGoFlagSet(goflags)
	return cmd
}
