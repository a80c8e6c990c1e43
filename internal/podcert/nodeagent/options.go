package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/configfile"
)

// Options are the agent's flags.
type Options struct {
	NodeName               string
	Dir                    string
	RefreshInterval        time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// ServeAllPods serves the podCertificate projected volumes of every pod on the node,
	// not only of those annotated ServeAnnotation: "agent".
	ServeAllPods bool
	// BundleMode is the mode of the credential files; directories get the matching
	// search (x) bits. BundleGID, when not -1, is the group of files and directories.
	BundleMode os.FileMode
	BundleGID  int
	// Layout names the files of a projection's directory: LayoutKubernetes (kubelet's
	// credentialbundle.pem) or LayoutSPIFFE (a SPIFFE Filesystem Delivery credential
	// folder: credential-bundle.pem and one <trust domain>.trust-bundle.pem per peer
	// trust domain).
	Layout string
	// Clock and Jitter are injected by tests.
	Clock  clock.PassiveClock
	Jitter func() time.Duration
	// ClockOffsetFile, a test hook (a hidden flag), names a file holding a Go duration
	// that is added to Clock while the agent runs, re-read when it changes: how a test
	// jumps the clock of the agent as shipped, a process (see offsetClock).
	ClockOffsetFile string
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Dir: "/var/run/trustplane/podcerts", RefreshInterval: time.Minute,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081", Clock: clock.RealClock{},
		BundleMode: 0o600, BundleGID: -1, Layout: LayoutKubernetes}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "The node this agent serves (required; usually from the downward API).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Root of the credential bundles: <dir>/<namespace>/<pod>/<volume>-<source>/"+BundleFile+".")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", o.RefreshInterval, "How often every projection is re-checked (kubelet: 1m).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.BoolVar(&o.ServeAllPods, "serve-all-pods", o.ServeAllPods, "Serve the podCertificate projected volumes of every pod on the node. Only for nodes whose kubelet does not "+
		"serve them itself (kubelet older than 1.35, the PodCertificateRequest feature gate off, or no kubelet): a 1.35+ kubelet does, and both would request "+
		"and warn twice. Without it, only pods annotated "+ServeAnnotation+"="+ServeAgent+" (volumes) or "+SignerAnnotation+" (no volume needed) are served.")
	fs.Var((*fileMode)(&o.BundleMode), "bundle-mode", "Mode of the credential files, octal (e.g. 0640 lets the --bundle-gid group read them); directories get the matching x bits.")
	fs.IntVar(&o.BundleGID, "bundle-gid", o.BundleGID, "Group of the credential files and their directories (-1: the agent's own); give pods this gid (runAsGroup or supplementalGroups) to read them as non-root.")
	fs.StringVar(&o.Layout, "layout", o.Layout, "Files of each projection's directory: "+LayoutKubernetes+" ("+BundleFile+"), or "+LayoutSPIFFE+
		" (the SPIFFE Filesystem Delivery layout: "+SPIFFECredentialBundleFile+" without the trust anchor, and <trust domain>"+TrustBundleSuffix+
		" for each ClusterTrustBundle of the projection's signer labelled "+certificates.LabelCanarying+"="+certificates.LabelCanaryingLive+
		" whose "+certificates.LabelWorkloadTrustDomain+" is the trust domain of the certificate's SPIFFE ID). The projection's keyPath, certificateChainPath and credentialBundlePath are written in both.")
	configfile.Enum(fs, "layout", LayoutKubernetes, LayoutSPIFFE)
	fs.StringVar(&o.ClockOffsetFile, "testing-clock-offset-file", o.ClockOffsetFile, "Test hook, never for production: a file holding a Go duration (10m, -10m; missing or empty: 0) "+
		"added to the agent's clock, read again every 250ms, so that a test can jump the clock of a running agent (faketime cannot move a Go process's clock). Logged at start and at every change.")
	// Hidden: not a setting (no field of the configuration file, no chart value).
	_ = fs.MarkHidden("testing-clock-offset-file")
}

// Validate checks the options before anything connects. A pointer receiver: the command
// binds opts.Validate before the flags are parsed into opts.
func (o *Options) Validate() error {
	if o.NodeName == "" {
		return errors.New("--node-name is required")
	}
	if o.Dir == "" {
		return errors.New("--dir is required")
	}
	if o.BundleMode&^os.ModePerm != 0 || o.BundleMode&0o600 != 0o600 {
		return fmt.Errorf("--bundle-mode %#o: permission bits only, and the owner must read and write", uint32(o.BundleMode))
	}
	if o.BundleGID < -1 {
		return fmt.Errorf("--bundle-gid %d: a group id, or -1", o.BundleGID)
	}
	if o.Layout != LayoutKubernetes && o.Layout != LayoutSPIFFE {
		return fmt.Errorf("--layout %q: one of %s, %s", o.Layout, LayoutKubernetes, LayoutSPIFFE)
	}
	return nil
}

// fileMode is an octal flag.
type fileMode os.FileMode

func (m *fileMode) String() string { return fmt.Sprintf("%#o", uint32(*m)) }
func (m *fileMode) Type() string   { return "mode" }
func (m *fileMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("not an octal mode: %w", err)
	}
	*m = fileMode(v)
	return nil
}
