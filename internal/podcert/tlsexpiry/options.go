package tlsexpiry

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/internal/manager"
)

const (
	// Name is the controller's name in --controllers.
	Name = "tls-expiry"
	// Help is the controller's one-line description in --help.
	Help = "Warning events and metrics when kubernetes.io/tls Secrets are overdue for renewal or expired"
)

// DefaultMaxCertificateBytes is the --tls-expiry-secret-max-certificate-bytes default. A leaf
// certificate with its chain is a few KiB (an RSA-4096 leaf and two intermediates are
// about 6 KiB of PEM); 64 KiB leaves ample room and still keeps a tenant from making the
// manager parse and fingerprint megabytes per Secret.
const DefaultMaxCertificateBytes = 64 << 10

// minMaxCertificateBytes is the smallest limit accepted: below it a single RSA-4096
// certificate would not fit.
const minMaxCertificateBytes = 4 << 10

// Options configure the controller: its flag, and the clock tests inject.
type Options struct {
	// MaxCertificateBytes is the largest tls.crt that is parsed; larger ones are left out
	// with a Warning event on the Secret.
	MaxCertificateBytes int
	// Clock decides when a certificate is overdue or expired.
	Clock clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{MaxCertificateBytes: DefaultMaxCertificateBytes, Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.MaxCertificateBytes, "tls-expiry-secret-max-certificate-bytes", o.MaxCertificateBytes, "Largest tls.crt of a kubernetes.io/tls Secret whose expiry is watched; a larger one is left out with a Warning event CertificateTooLarge on the Secret.")
	manager.DeprecatedAlias(fs, "secret-max-certificate-bytes", Name+"-secret-max-certificate-bytes")
}

// Validate checks the options before anything connects.
func (o Options) Validate() error {
	if o.MaxCertificateBytes < minMaxCertificateBytes {
		return fmt.Errorf("--tls-expiry-secret-max-certificate-bytes=%d: must be at least %d (one RSA-4096 certificate)", o.MaxCertificateBytes, minMaxCertificateBytes)
	}
	return nil
}
