// Package cli is the trustplane command line: one binary, one subcommand per role.
package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

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
	cmd := clusterCommand("node-agent",
		"Pod-certificate agent, one per node: requests, refreshes and writes the pod certificates of its node's pods",
		// Validate has a pointer receiver, so this method value reads the parsed flags.
		opts.Validate,
		func(ctx context.Context, cfg *rest.Config) error { return nodeagent.Run(ctx, cfg, opts) })
	opts.AddFlags(cmd.Flags())
	return cmd
}

func newDataplaneCommand() *cobra.Command {
	opts := dataplaneagent.DefaultOptions()
	cmd := clusterCommand("dataplane",
		"Secret-consistency data-plane agent: writes the TLS and CA Secrets it follows (every namespace, or --namespace/--namespaces) to a directory only while they match a SecretCheckSum",
		opts.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return dataplaneagent.Run(ctx, cfg, opts) })
	opts.AddFlags(cmd.Flags())
	return cmd
}
