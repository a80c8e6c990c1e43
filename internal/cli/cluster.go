package cli

import (
	"context"
	goflag "flag"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trustplane/trustplane/internal/configfile"
	"github.com/trustplane/trustplane/internal/status"
)

// clusterCommand is a subcommand that talks to a cluster: it gets --kubeconfig, --config
// (a file of schema's kind, read before anything else; flags on the command line win) and
// the logging flags (its file's logging section), checks its own options before connecting (so bad flags fail at once,
// without a cluster), reports its configuration, then sets up logging and runs.
func clusterCommand(use, short string, schema *configfile.Schema, validate func() error, run func(ctx context.Context, cfg *rest.Config) error) *cobra.Command {
	zapOpts := zap.Options{}
	var configFile string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if configFile != "" {
			if err := schema.Load(configFile, cmd.Flags().Changed); err != nil {
				return err
			}
		}
		if err := validate(); err != nil {
			return fromFile(err, schema, configFile)
		}
		// A stalled object (a user's mistake) is logged at info, not as an error with a
		// stack trace: its conditions and events say what to change.
		ctrl.SetLogger(status.QuietTerminalErrors(zap.New(zap.UseFlagOptions(&zapOpts))))
		ctrl.Log.WithName("setup").Info("configuration", "apiVersion", configfile.APIVersion, "kind", schema.Kind, "file", configFile, "values", schema.Effective())
		cfg, err := restConfig()
		if err != nil {
			return err
		}
		return fromFile(run(cmd.Context(), cfg), schema, configFile)
	}
	cmd.Flags().StringVar(&configFile, "config", "", fmt.Sprintf("A %s file (apiVersion %s); a flag given on the command line overrides its field. See docs/configuration.md.", schema.Kind, configfile.APIVersion))
	goflags := goflag.NewFlagSet(use, goflag.ContinueOnError)
	crconfig.RegisterFlags(goflags)
	cmd.Flags().AddGoFlagSet(goflags)
	section(cmd, schema, "logging", "The process's log: controller-runtime's zap options (--zap-*), read before the logger is made.",
		func(fs *pflag.FlagSet) { addLoggingFlags(fs, &zapOpts) })
	return cmd
}

// restConfig is the API server connection of every command that talks to a cluster
// (--kubeconfig, $KUBECONFIG, in-cluster), asking for uncompressed answers, as
// kube-controller-manager and kube-scheduler do (kubernetes#80919): on the network
// between a cluster's own components gzip costs more CPU than it saves time. Since the API
// server compresses watch-list streams (WatchListCompression, Kubernetes 1.37) and
// client-go's informers open their watches as watch lists, it compressed every event each
// informer received, one flush at a time: in bench-jwks at 10,000 sets, 0.7 s of the
// manager's 21 s of CPU went on inflating them, and the API server spent about as much on
// deflating.
func restConfig() (*rest.Config, error) {
	cfg, err := crconfig.GetConfig()
	if err != nil {
		return nil, err
	}
	cfg.DisableCompression = true
	return cfg, nil
}

// addLoggingFlags registers controller-runtime's zap flags (--zap-devel, --zap-encoder,
// --zap-log-level, --zap-stacktrace-level, --zap-time-encoding) on fs.
func addLoggingFlags(fs *pflag.FlagSet, opts *zap.Options) {
	goflags := goflag.NewFlagSet("logging", goflag.ContinueOnError)
	opts.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
}

// fromFile adds to an error that names a flag the file's field that set it, so an invalid
// value read from --config is found where it was written.
func fromFile(err error, schema *configfile.Schema, file string) error {
	if err == nil || file == "" {
		return err
	}
	for _, f := range schema.Fields() {
		if f.Flag != nil && f.Flag.Changed && strings.Contains(err.Error(), "--"+f.Flag.Name) {
			return fmt.Errorf("%w (field %s of --config %s, unless given as a flag)", err, f.Path, file)
		}
	}
	return err
}

// section registers the flags add binds as one section of schema (and as flags of cmd).
// The fields are named without the prefix the section's flags share: its name, else the
// longest shared dash-ended prefix of two or more flags.
func section(cmd *cobra.Command, schema *configfile.Schema, name, doc string, add func(fs *pflag.FlagSet)) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	add(fs)
	cmd.Flags().AddFlagSet(fs)
	schema.Sections = append(schema.Sections, configfile.Section{Name: camel(name), Prefix: sharedPrefix(fs, name), Doc: doc, Flags: fs})
}

func sharedPrefix(fs *pflag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Deprecated == "" { // an old name kept as an alias is no field
			names = append(names, f.Name)
		}
	})
	if name != "" && allHave(names, name+"-") {
		return name + "-"
	}
	if len(names) < 2 {
		return ""
	}
	prefix := names[0]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	return prefix[:strings.LastIndex(prefix, "-")+1]
}

func allHave(names []string, prefix string) bool {
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			return false
		}
	}
	return len(names) > 0
}

// camel is a controller's name as a section's: "secret-checksum" → "secretChecksum".
func camel(name string) string {
	parts := strings.Split(name, "-")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}
