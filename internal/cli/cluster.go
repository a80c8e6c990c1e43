package cli

import (
	"context"
	goflag "flag"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/internal/status"
)

// clusterCommand is a subcommand that talks to a cluster: it gets --kubeconfig and the
// logging flags, checks its own options before connecting (so bad flags fail at once,
// without a cluster), then sets up logging and runs.
func clusterCommand(use, short string, validate func() error, run func(ctx context.Context, cfg *rest.Config) error) *cobra.Command {
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validate(); err != nil {
				return err
			}
			// A stalled object (a user's mistake) is logged at info, not as an error
			// with a stack trace: its conditions and events say what to change.
			ctrl.SetLogger(status.QuietTerminalErrors(zap.New(zap.UseFlagOptions(&zapOpts))))
			cfg, err := config.GetConfig()
			if err != nil {
				return err
			}
			return run(cmd.Context(), cfg)
		},
	}
	goflags := goflag.NewFlagSet(use, goflag.ContinueOnError)
	config.RegisterFlags(goflags)
	zapOpts.BindFlags(goflags)
	cmd.Flags().AddGoFlagSet(goflags)
	return cmd
}
