// Package cli assembles the trustplane command: one binary, one subcommand per role. It
// builds the processes that run in the cluster (manager, node-agent, dataplane,
// jwks-server, jwt-signer), binds their flags as sections of their configuration files
// and registers the manager's controllers; the day-2 verbs for users are internal/usercli's.
package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/checksum/dataplaneagent"
	"github.com/trustplane/trustplane/internal/configfile"
	"github.com/trustplane/trustplane/internal/jwks/jwksserver"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/usercli"
	"github.com/trustplane/trustplane/internal/version"
)

// groupProcesses is the group of `trustplane --help` that lists the processes.
const groupProcesses = "processes"

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
	jwtSignerCmd, _ := newJWTSignerCommand()
	usercli.AddCommands(root)
	root.AddGroup(&cobra.Group{ID: groupProcesses, Title: "Processes (what runs in the cluster):"})
	for _, c := range []*cobra.Command{managerCmd, nodeAgentCmd, dataplaneCmd, jwksServerCmd, jwtSignerCmd} {
		c.GroupID = groupProcesses
	}
	root.AddCommand(managerCmd, nodeAgentCmd, dataplaneCmd, jwksServerCmd, jwtSignerCmd, newVersionCommand())
	return root
}

// ConfigSchemas are the kinds of configuration file the subcommands read, with every
// field bound to a fresh command's flags: the source of docs/configuration.md and of the
// chart's values.schema.json.
func ConfigSchemas() []*configfile.Schema {
	_, m := newManagerCommand()
	_, n := newNodeAgentCommand()
	_, d := newDataplaneCommand()
	_, j := newJWKSServerCommand()
	_, s := newJWTSignerCommand()
	return []*configfile.Schema{m, n, d, j, s}
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

func newNodeAgentCommand() (*cobra.Command, *configfile.Schema) {
	opts := nodeagent.DefaultOptions()
	schema := &configfile.Schema{Kind: "NodeAgentConfiguration", Command: "trustplane node-agent"}
	cmd := clusterCommand("node-agent",
		"Pod-certificate agent, one per node: requests, refreshes and writes the pod certificates of its node's pods", schema,
		// Validate has a pointer receiver, so this method value reads the parsed flags.
		opts.Validate,
		func(ctx context.Context, cfg *rest.Config) error { return nodeagent.Run(ctx, cfg, opts) })
	section(cmd, schema, "", "The node agent.", opts.AddFlags)
	return cmd, schema
}

func newJWKSServerCommand() (*cobra.Command, *configfile.Schema) {
	opts := jwksserver.DefaultOptions()
	server := jwksserver.DefaultServerOptions()
	schema := &configfile.Schema{Kind: "JWKSServerConfiguration", Command: "trustplane jwks-server"}
	cmd := clusterCommand("jwks-server",
		"trustplane's JWKS server alone (the manager runs it too, unless --jwks-server-bind-address=0): a Deployment of its own that no client exhausting it can make stop the controllers", schema,
		server.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return jwksserver.Run(ctx, cfg, opts, server) })
	section(cmd, schema, "", "The process.", opts.AddFlags)
	section(cmd, schema, "jwks", "The JWKS server, and the issuer claims it honours (the same flags as the manager's).", server.AddServerFlags)
	return cmd, schema
}

func newDataplaneCommand() (*cobra.Command, *configfile.Schema) {
	opts := dataplaneagent.DefaultOptions()
	schema := &configfile.Schema{Kind: "DataplaneConfiguration", Command: "trustplane dataplane"}
	cmd := clusterCommand("dataplane",
		"Secret-consistency data-plane agent: writes the TLS and CA Secrets it follows (every namespace, or --namespace/--namespaces) to a directory only while they match a SecretCheckSum", schema,
		opts.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return dataplaneagent.Run(ctx, cfg, opts) })
	section(cmd, schema, "", "The data-plane agent.", opts.AddFlags)
	return cmd, schema
}
