// Package cli is the trustplane command line: one binary, one subcommand per role.
package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

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

// errNotBuiltYet marks roles whose system is not implemented in this release.
var errNotBuiltYet = errors.New("not implemented in this release")

func newNodeAgentCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "node-agent",
		Short: "Pod-certificate agent, one per node (not implemented in this release)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("node-agent: %w", errNotBuiltYet)
		},
	}
}

func newDataplaneCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dataplane",
		Short: "Secret-consistency data-plane agent (not implemented in this release)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("dataplane: %w", errNotBuiltYet)
		},
	}
}
