// Package cli is the trustplane command line: one binary, one subcommand per role.
package cli

import (
	goflag "flag"
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/internal/dataplaneagent"
	"github.com/trustplane/trustplane/internal/nodeagent"

	"github.com/trustplane/trustplane/internal/version"
)

// NewRootCommand builds `trustplane` and its subcommands.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "trustplane",
		Short: "Trust material for Kubernetes: JWK Sets, RBAC aggregation, secret consistency, pod certificates, scoped kubeconfigs",
		// Errors are printed once, as one line, by main; usage is for --help only.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(
		newManagerCommand(),
		newNodeAgentCommand(),
		newDataplaneCommand(),
		newVersionCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
			return nil
		},
	}
}

func newNodeAgentCommand() *cobra.Command {
	opts := nodeagent.DefaultOptions()
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "node-agent",
		Short: "Pod-certificate agent, one per node: requests, refreshes and writes the pod certificates of its node's pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := config.GetConfig()
			if err != nil {
				return err
			}
			return nodeagent.Run(cmd.Context(), cfg, opts)
		},
	}
	opts.AddFlags(cmd.Flags())
	goflags := goflag.NewFlagSet("node-agent", goflag.ContinueOnError)
	config.RegisterFlags(goflags)
	zapOpts.BindFlags(goflags)
	cmd.Flags().AddGoFlagSet(goflags)
	return cmd
}

func newDataplaneCommand() *cobra.Command {
	opts := dataplaneagent.DefaultOptions()
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "dataplane",
		Short: "Secret-consistency data-plane agent: writes a namespace's TLS Secrets to a directory only while they match the SecretCheckSum",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := config.GetConfig()
			if err != nil {
				return err
			}
			return dataplaneagent.Run(cmd.Context(), cfg, opts)
		},
	}
	opts.AddFlags(cmd.Flags())
	goflags := goflag.NewFlagSet("dataplane", goflag.ContinueOnError)
	config.RegisterFlags(goflags)
	zapOpts.BindFlags(goflags)
	cmd.Flags().AddGoFlagSet(goflags)
	return cmd
}
