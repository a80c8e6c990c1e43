package dataplaneagent

import (
	"errors"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/trustplane/trustplane/internal/checksum"
)

// Options are the agent's flags.
type Options struct {
	// Namespace is the one namespace to follow (the sidecar's); Namespaces a list. Neither:
	// every namespace, as Tengine-Ingress without --watch-namespace.
	Namespace              string
	Namespaces             []string
	Dir                    string
	VersionAnnotation      string
	FailOpen               bool
	Ingresses              bool
	IngressClasses         checksum.IngressClassOptions
	ReloadCommand          string
	QuietPeriod            time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
}

// DefaultOptions are the flag defaults; Tengine-Ingress is fail-open.
func DefaultOptions() Options {
	return Options{VersionAnnotation: checksum.DefaultVersionAnnotation, FailOpen: true, Ingresses: true,
		IngressClasses: checksum.DefaultIngressClassOptions(), QuietPeriod: 200 * time.Millisecond,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081"}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The one namespace whose Secrets, Ingresses and checksums to follow (a sidecar's). Neither this nor --namespaces: every namespace, as Tengine-Ingress.")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces, "Namespaces to follow, comma-separated; the files are then named <namespace>.<name>.* (unless the list has one namespace).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Directory for the verified <name>.crt/.key/.ca.crt files and the snapshot (required).")
	fs.StringVar(&o.VersionAnnotation, "version-annotation", o.VersionAnnotation, "Annotation holding a Secret's version.")
	fs.BoolVar(&o.FailOpen, "fail-open", o.FailOpen, "Trust the secrets when no SecretCheckSum exists (Tengine-Ingress's behaviour); false keeps the last verified set.")
	fs.BoolVar(&o.Ingresses, "ingresses", o.Ingresses, "Also verify the Ingresses against the IngressCheckSums (reported in metrics and events).")
	o.IngressClasses.AddFlags(fs, "")
	fs.StringVar(&o.ReloadCommand, "reload-command", o.ReloadCommand, "Command run after the verified files change, e.g. 'nginx -s reload' (split on spaces, no shell). When it fails the previous files are put back and it is retried.")
	fs.DurationVar(&o.QuietPeriod, "quiet-period", o.QuietPeriod, "Wait for this much quiet after a change before re-checking.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
}

// Validate checks the options before anything connects (a pointer receiver, as the
// node agent's: the command binds opts.Validate before the flags are parsed).
func (o *Options) Validate() error {
	switch {
	case o.Namespace != "" && len(o.Namespaces) > 0:
		return errors.New("--namespace and --namespaces are mutually exclusive")
	case o.Dir == "":
		return errors.New("--dir is required")
	}
	return nil
}

// WatchedNamespaces are the namespaces followed, sorted; none means every namespace.
func (o Options) WatchedNamespaces() []string {
	if o.Namespace != "" {
		return []string{o.Namespace}
	}
	ns := slices.DeleteFunc(slices.Clone(o.Namespaces), func(n string) bool { return n == "" })
	return checksum.NewScope(ns, o.VersionAnnotation).Namespaces
}
