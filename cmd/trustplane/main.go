// Command trustplane runs trustplane's controllers and agents; see `trustplane --help`.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/cli"
)

func main() {
	// SIGTERM or SIGINT stops the command gracefully; a second one exits at once.
	ctx := ctrl.SetupSignalHandler()
	err := cli.NewRootCommand().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trustplane: %v\n", err)
		os.Exit(1)
	}
}
