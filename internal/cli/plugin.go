package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// addUserCommands adds the verbs for the people who use trustplane (as cmctl and flux are
// for theirs) to root, grouped apart from the processes that run in the cluster. Run as
// kubectl-trustplane, the binary is a kubectl plugin: its help says `kubectl trustplane`.
func addUserCommands(root *cobra.Command) {
	root.AddGroup(
		&cobra.Group{ID: groupDay2, Title: "Day 2 (as a user of the cluster; kubectl's flags: --kubeconfig, --context, -n, -A, -o):"},
		&cobra.Group{ID: groupProcesses, Title: "Processes (what runs in the cluster):"},
	)
	for _, c := range root.Commands() {
		if c.Name() == "manager" || c.Name() == "node-agent" || c.Name() == "dataplane" {
			c.GroupID = groupProcesses
		}
	}
	root.AddCommand(newGetCommand(), newDescribeCommand(), newKubeconfigCommand(), newRotateCommand(), newRevokeCommand(),
		newReconcileCommand(), newJWKSCommand(), newChecksumCommand(), newPodcertCommand())
	if name := commandName(); name != root.Name() {
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	}
}

// day2Group is a Day-2 verb that only groups its subcommands (jwks, checksum, podcert).
func day2Group(use, short string, subcommands ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, GroupID: groupDay2, RunE: parentRunE}
	cmd.AddCommand(subcommands...)
	return cmd
}

// parentRunE makes a command that only groups subcommands refuse an unknown one (one
// line, exit 1) instead of printing its help as if asked.
func parentRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}
