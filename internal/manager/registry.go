// Package manager runs trustplane's controllers in one controller-runtime manager:
// controller selection, leader election, metrics, health probes.
package manager

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Controller is one controller that the manager can run.
type Controller struct {
	// Name is what --controllers selects it by.
	Name string
	// Help is the one-line description listed in --help.
	Help string
	// DisabledByDefault keeps it out of "*"; it runs only when named.
	DisabledByDefault bool
	// AddFlags registers the controller's own flags; may be nil.
	AddFlags func(fs *pflag.FlagSet)
	// Validate checks the controller's options once the flags (and --config) are read,
	// before anything connects; may be nil.
	Validate func() error
	// Collectors are the controller's Prometheus collectors (its package's Collectors()),
	// registered by the manager when the controller is selected, before Setup.
	Collectors []prometheus.Collector
	// Setup wires the controller into the manager.
	Setup func(mgr ctrl.Manager) error
}

// Select resolves a --controllers value the way kube-controller-manager does: "*" means
// every controller that is on by default, "name" turns one on, "-name" turns one off, and
// the later of "name"/"-name" wins over "*". Unknown names are an error, so a typo never
// silently disables a controller.
func Select(known []Controller, spec []string) ([]Controller, error) {
	byName := make(map[string]Controller, len(known))
	for _, c := range known {
		byName[c.Name] = c
	}
	star := false
	explicit := map[string]bool{}
	for _, raw := range spec {
		item := strings.TrimSpace(raw)
		switch item {
		case "":
			continue
		case "*":
			star = true
			continue
		}
		name, on := strings.TrimPrefix(item, "-"), !strings.HasPrefix(item, "-")
		if _, ok := byName[name]; !ok {
			return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", name, strings.Join(Names(known), ", "))
		}
		explicit[name] = on
	}
	var selected []Controller
	for _, c := range known {
		on, named := explicit[c.Name]
		if !named {
			on = star && !c.DisabledByDefault
		}
		if on {
			selected = append(selected, c)
		}
	}
	return selected, nil
}

// Names lists controller names in sorted order.
func Names(cs []Controller) []string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Describe is the controller list printed in --help.
func Describe(cs []Controller) string {
	var b strings.Builder
	for _, c := range cs {
		def := ""
		if c.DisabledByDefault {
			def = " (off by default)"
		}
		fmt.Fprintf(&b, "  %-26s %s%s\n", c.Name, c.Help, def)
	}
	return b.String()
}

// DeprecatedAlias registers old as another name of the flag current, marked deprecated:
// it sets the same value, is left out of --help and the configuration reference, and
// pflag says once, when it is used, which name replaced it. A flag renamed to carry its
// controller's prefix keeps working under its old name this way.
func DeprecatedAlias(fs *pflag.FlagSet, old, current string) {
	f := fs.Lookup(current)
	if f == nil {
		panic("DeprecatedAlias: no flag --" + current) // a programming error, found by any test
	}
	fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal})
	if err := fs.MarkDeprecated(old, "use --"+current); err != nil {
		panic(err)
	}
}
