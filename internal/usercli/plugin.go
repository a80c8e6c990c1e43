// Package usercli is trustplane's day-2 command line for the people who use it (as cmctl
// and flux are for theirs): get, describe, kubeconfig, rotate, revoke, reconcile, jwks,
// checksum, podcert and pool. Run as kubectl-trustplane, the binary is a kubectl plugin and
// its help says `kubectl trustplane`. The verbs read and annotate objects through one
// connection (clientFlags.connect, kubectl's flags) and never run a controller: the
// manager's and agents' assembly is internal/cli, which this package does not import.
package usercli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// GroupDay2 is the group of `trustplane --help` that lists the day-2 verbs.
const GroupDay2 = "day2"

// AddCommands adds the day-2 verbs to root, in a group of their own, and names the
// command as the user called it (`kubectl trustplane` as a kubectl plugin).
func AddCommands(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: GroupDay2, Title: "Day 2 (as a user of the cluster; kubectl's flags: --kubeconfig, --context, -n, -A, -o):"})
	root.AddCommand(newGetCommand(), newDescribeCommand(), newKubeconfigCommand(), newRotateCommand(), newRevokeCommand(),
		newReconcileCommand(), newJWKSCommand(), newChecksumCommand(), newPodcertCommand(), newPoolCommand())
	if name := commandName(); name != root.Name() {
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	}
}

// day2Group is a Day-2 verb that only groups its subcommands (jwks, checksum, podcert).
func day2Group(use, short string, subcommands ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, GroupID: GroupDay2, RunE: parentRunE}
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
