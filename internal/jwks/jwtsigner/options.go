package jwtsigner

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// MinTokenExpiration is the shortest --max-token-expiration kube-apiserver accepts
	// from an external signer's Metadata: it refuses to start below 10 minutes
	// (validation.MinTokenAgeSec in pkg/apis/authentication/validation).
	MinTokenExpiration = 10 * time.Minute
	// MaxTokenExpiration is the longest: kube-apiserver caps
	// --service-account-max-token-expiration at 2^32 seconds.
	MaxTokenExpiration = time.Duration(1<<32) * time.Second
)

// Options are the flags of `trustplane jwt-signer`.
type Options struct {
	// Socket is the unix socket kube-apiserver's --service-account-signing-endpoint names.
	Socket string
	// JWKSConfig is the JWKSConfig whose keys the signer serves, as namespace/name.
	JWKSConfig string
	// MaxTokenExpiration is what Metadata answers: the longest token kube-apiserver may
	// ask for. Without --service-account-max-token-expiration it becomes kube-apiserver's
	// limit; with one, that flag must not exceed it.
	MaxTokenExpiration time.Duration
	// StateDir keeps the last signing key and set served (state.json), or the seed of a
	// new control plane (tls.crt and tls.key); "" keeps no state.
	StateDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{MaxTokenExpiration: 24 * time.Hour, HealthProbeBindAddress: "0"}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Socket, "socket", o.Socket, "Path of the unix socket to serve kube-apiserver's external JWT signer API on (its --service-account-signing-endpoint); '@name' is an abstract socket. A socket left by an earlier run is replaced; any other file there is refused.")
	fs.StringVar(&o.JWKSConfig, "jwksconfig", o.JWKSConfig, "The JWKSConfig (namespace/name) whose published set is served and whose signing key signs: tls.key of spec.signingSecret when set, else of spec.certificateSecret.")
	fs.DurationVar(&o.MaxTokenExpiration, "max-token-expiration", o.MaxTokenExpiration, "The longest token lifetime the signer answers in Metadata (at least 10m, as kube-apiserver requires; kube-apiserver's --service-account-max-token-expiration, when set, must not exceed it).")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "Directory where the signer keeps the signing key and set it last served (state.json, mode 0600) and serves them at start until the API server answers; on a new control plane, seed it with the tls.crt and tls.key of the certificate Secret to be created. Empty: no state, nothing is served until the API server answers.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz (ready once the socket serves); '0' disables it.")
}

// Validate checks the options before anything connects: a mistake stops the process with
// one line naming the flag.
func (o *Options) Validate() error {
	if o.Socket == "" {
		return fmt.Errorf("--socket is required: the path kube-apiserver's --service-account-signing-endpoint names, such as /run/trustplane/jwt-signer.sock")
	}
	if _, err := o.Key(); err != nil {
		return err
	}
	if o.MaxTokenExpiration < MinTokenExpiration || o.MaxTokenExpiration > MaxTokenExpiration {
		return fmt.Errorf("--max-token-expiration %v is out of range: kube-apiserver accepts from %v to 2^32 seconds, such as 24h", o.MaxTokenExpiration, MinTokenExpiration)
	}
	if o.MaxTokenExpiration%time.Second != 0 {
		return fmt.Errorf("--max-token-expiration %v is not a whole number of seconds, such as 24h", o.MaxTokenExpiration)
	}
	return nil
}

// Key is the JWKSConfig named by --jwksconfig.
func (o *Options) Key() (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(o.JWKSConfig, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--jwksconfig %q is not namespace/name, such as kube-system/service-accounts", o.JWKSConfig)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
