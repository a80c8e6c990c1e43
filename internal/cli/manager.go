package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/manager"
)

func newManagerCommand() *cobra.Command {
	deps := newDependencies()
	known := controllers(deps)
	opts := manager.DefaultOptions()
	// Select before connecting, so a typo in --controllers fails at once.
	validate := func() error { _, err := manager.Select(known, opts.Controllers); return err }
	cmd := clusterCommand("manager", "Run the controllers (all of them by default; see --controllers)", validate,
		func(ctx context.Context, cfg *rest.Config) error {
			mgr, err := manager.New(cfg, opts, known)
			if err != nil {
				return err
			}
			return manager.Run(ctx, mgr)
		})
	opts.AddFlags(cmd.Flags(), known)
	deps.AddFlags(cmd.Flags())
	for _, c := range known {
		if c.AddFlags != nil {
			c.AddFlags(cmd.Flags())
		}
	}
	return cmd
}
