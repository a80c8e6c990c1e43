package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/configfile"
	"github.com/trustplane/trustplane/internal/manager"
)

func newManagerCommand() (*cobra.Command, *configfile.Schema) {
	deps := newDependencies()
	known := controllers(deps)
	opts := manager.DefaultOptions()
	schema := &configfile.Schema{Kind: "ManagerConfiguration", Command: "trustplane manager"}
	// Before connecting, so a typo in --controllers or a value out of range fails at once.
	validate := func() error {
		if err := opts.Validate(); err != nil {
			return err
		}
		selected, err := manager.Select(known, opts.Controllers)
		if err != nil {
			return err
		}
		for _, c := range selected {
			if c.Validate != nil {
				if err := c.Validate(); err != nil {
					return err
				}
			}
		}
		if err := deps.gardenOpts.Validate(); err != nil {
			return err
		}
		return deps.policy.Validate()
	}
	cmd := clusterCommand("manager", "Run the controllers (all of them by default; see --controllers)", schema, validate,
		func(ctx context.Context, cfg *rest.Config) error {
			mgr, err := manager.New(cfg, opts, known)
			if err != nil {
				return err
			}
			return manager.Run(ctx, mgr)
		})
	section(cmd, schema, "manager", "The manager process: which controllers run, leader election, metrics and probes.",
		func(fs *pflag.FlagSet) { opts.AddFlags(fs, known) })
	for _, c := range known {
		if c.AddFlags != nil {
			section(cmd, schema, c.Name, "The "+c.Name+" controller: "+c.Help+".", c.AddFlags)
		}
	}
	gardenFlags := pflag.NewFlagSet("garden", pflag.ContinueOnError)
	deps.gardenOpts.AddFlags(gardenFlags)
	section(cmd, schema, "garden", "The Gardener project of the cluster, kubeconfig and subscription controllers.", only(gardenFlags, "garden-"))
	section(cmd, schema, "shoot", "What every Shoot the cluster controller applies says.", only(gardenFlags, "shoot-"))
	schema.Sections = append(schema.Sections, configfile.Section{Name: "landscape", Object: &deps.gardenOpts.Shoot.Landscape,
		Doc: "What a Kyma landscape adds to every Shoot (audit logging, DNS, maintenance per region, exposure classes, EU access): read from the file only."})
	section(cmd, schema, "tenantKubeconfig", "What a brought-along Cluster's kubeconfig may use (cluster and kubeconfig controllers).", deps.policy.AddFlags)
	return cmd, schema
}

// only registers the flags of from whose names start with prefix.
func only(from *pflag.FlagSet, prefix string) func(fs *pflag.FlagSet) {
	return func(fs *pflag.FlagSet) {
		from.VisitAll(func(f *pflag.Flag) {
			if strings.HasPrefix(f.Name, prefix) {
				fs.AddFlag(f)
			}
		})
	}
}
