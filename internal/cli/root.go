// Package cli is the trustplane command line: one binary, one subcommand per role.
package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/checksum/dataplaneagent"
	"github.com/trustplane/trustplane/internal/config"
	"github.com/trustplane/trustplane/internal/jwks/jwksserver"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
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
	managerCmd, _ := newManagerCommand()
	nodeAgentCmd, _ := newNodeAgentCommand()
	dataplaneCmd, _ := newDataplaneCommand()
	jwksServerCmd, _ := newJWKSServerCommand()
	root.AddCommand(managerCmd, nodeAgentCmd, dataplaneCmd, jwksServerCmd, newVersionCommand())
	addUserCommands(root)
	return root
}

// ConfigSchemas are the kinds of configuration file the subcommands read, with every
// field bound to a fresh command's flags: the source of docs/configuration.md and of the
// chart's values.schema.json.
func ConfigSchemas() []*config.Schema {
	_, m := newManagerCommand()
	_, n := newNodeAgentCommand()
	_, d := newDataplaneCommand()
	_, j := newJWKSServerCommand()
	return []*config.Schema{m, n, d, j}
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

func newNodeAgentCommand() (*cobra.Command, *config.Schema) {
	opts := nodeagent.DefaultOptions()
	schema := &config.Schema{Kind: "NodeAgentConfiguration", Command: "trustplane node-agent"}
	cmd := clusterCommand("node-agent",
		"Pod-certificate agent, one per node: requests, refreshes and writes the pod certificates of its node's pods", schema,
		// Validate has a pointer receiver, so this method value reads the parsed flags.
		opts.Validate,
		func(ctx context.Context, cfg *rest.Config) error { return nodeagent.Run(ctx, cfg, opts) })
	section(cmd, schema, "", "The node agent.", opts.AddFlags)
	return cmd, schema
}

func newJWKSServerCommand() (*cobra.Command, *config.Schema) {
	opts := jwksserver.DefaultOptions()
	server := jwksserver.DefaultServerOptions()
	schema := &config.Schema{Kind: "JWKSServerConfiguration", Command: "trustplane jwks-server"}
	cmd := clusterCommand("jwks-server",
		"trustplane's JWKS server alone (the manager runs it too, unless --jwks-server-bind-address=0): a Deployment of its own that no client exhausting it can make stop the controllers", schema,
		server.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return jwksserver.Run(ctx, cfg, opts, server) })
	section(cmd, schema, "", "The process.", opts.AddFlags)
	section(cmd, schema, "jwks", "The JWKS server, and the issuer claims it honours (the same flags as the manager's).", server.AddServerFlags)
	return cmd, schema
}

func newDataplaneCommand() (*cobra.Command, *config.Schema) {
	opts := dataplaneagent.DefaultOptions()
	schema := &config.Schema{Kind: "DataplaneConfiguration", Command: "trustplane dataplane"}
	cmd := clusterCommand("dataplane",
		"Secret-consistency data-plane agent: writes the TLS and CA Secrets it follows (every namespace, or --namespace/--namespaces) to a directory only while they match a SecretCheckSum", schema,
		opts.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return dataplaneagent.Run(ctx, cfg, opts) })
	section(cmd, schema, "", "The data-plane agent.", opts.AddFlags)
	return cmd, schema
}
