// Command configref writes docs/configuration.md, the reference of trustplane's
// configuration files, and the "config" parts of the chart's values.schema.json, from the
// subcommands' own flags (internal/cli.ConfigSchemas). `make manifests` runs it;
// internal/cli's tests fail when what it writes is stale.
package main

import (
	"fmt"
	"os"

	"github.com/trustplane/trustplane/internal/cli"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: configref docs/configuration.md charts/trustplane")
		os.Exit(2)
	}
	if err := cli.WriteConfigReference(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "configref:", err)
		os.Exit(1)
	}
}
