package podcertsigner

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
)

const (
	// Name is the controller's name in --controllers.
	Name = "podcertificate-signer"
	// Help is the controller's one-line description in --help.
	Help = "PodCertificateRequest signer backed by a CA Secret"
)

// Options configure the signer: its flags, and the clock tests inject.
type Options struct {
	// SignerName is the signerName whose PodCertificateRequests this signer issues.
	SignerName string
	// CANamespace and CASecretName name the kubernetes.io/tls Secret holding the CA.
	CANamespace  string
	CASecretName string
	// MaxLifetime is the longest certificate lifetime issued (at least 1h).
	MaxLifetime time.Duration
	// KeyTypes are the key types issued; others are denied UnsupportedKeyType.
	KeyTypes []string
	// TrustDomain is the trust domain of the SPIFFE ID URI SAN.
	TrustDomain string
	// ClusterDomain is the cluster's DNS domain (kubelet's clusterDomain): a
	// PodIdentityPolicy's DNS names are <...>.<namespace>.svc or the same in it.
	ClusterDomain string
	// Workers is the number of concurrent signings.
	Workers int
	// CARotation generates a new CA this often (0: only supplied CAs rotate in).
	CARotation time.Duration
	// CAOverlap is how long a new CA is in the trust bundle before it signs.
	CAOverlap time.Duration
	// RefreshFraction is the fraction of a certificate's lifetime after which kubelet
	// refreshes it (beginRefreshAt), within the API's bounds.
	RefreshFraction float64
	// Backdate is how far notBefore lies before the signing, for relying parties whose
	// clocks run behind.
	Backdate time.Duration
	// CanaryObservation, when not 0, canaries every next CA: it is published in the
	// preview bundle for the canaries first, and goes live once they have been observed
	// this long without a failure.
	CanaryObservation time.Duration
	// CanaryNamespaceSelector and CanaryNodeSelector are label selectors of the namespaces
	// and nodes whose pods are the canaries.
	CanaryNamespaceSelector string
	CanaryNodeSelector      string
	// Clock decides the certificates' times and the CA rotation's.
	Clock clock.PassiveClock

	// canaryNamespaces and canaryNodes are the parsed selectors (Setup).
	canaryNamespaces, canaryNodes labels.Selector
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		SignerName: "trustplane.io/pod-identity", CANamespace: manager.OwnNamespace(), CASecretName: "trustplane-pod-identity-ca",
		MaxLifetime: 24 * time.Hour, KeyTypes: []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"},
		TrustDomain: "cluster.local", ClusterDomain: "cluster.local", Workers: 16, CAOverlap: time.Hour, RefreshFraction: 2.0 / 3, Backdate: time.Minute,
		CanaryNamespaceSelector: certificates.LabelCanary + "=true", CanaryNodeSelector: certificates.LabelCanary + "=true",
		Clock: clock.RealClock{},
	}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SignerName, "podcertificate-signer-signer-name", o.SignerName, "signerName whose PodCertificateRequests this signer issues.")
	fs.StringVar(&o.CANamespace, "podcertificate-signer-ca-namespace", o.CANamespace, "Namespace of the CA Secret (default: the manager's own).")
	fs.StringVar(&o.CASecretName, "podcertificate-signer-ca-secret", o.CASecretName, "kubernetes.io/tls Secret holding the CA; created with a new self-signed P-256 CA when absent, never overwritten.")
	fs.DurationVar(&o.MaxLifetime, "podcertificate-signer-max-lifetime", o.MaxLifetime, "Longest certificate lifetime issued (at least 1h, as the API requires).")
	fs.StringSliceVar(&o.KeyTypes, "podcertificate-signer-key-types", o.KeyTypes, "Key types issued; others are denied UnsupportedKeyType.")
	fs.StringVar(&o.TrustDomain, "podcertificate-signer-trust-domain", o.TrustDomain, "Trust domain of the SPIFFE ID URI SAN (spiffe://<domain>/ns/<ns>/sa/<sa>): the name alone, in lower-case letters, digits, '.', '-' and '_' (SPIFFE's rule); anything else is refused at start.")
	fs.StringVar(&o.ClusterDomain, "podcertificate-signer-cluster-domain", o.ClusterDomain, "The cluster's DNS domain (kubelet's clusterDomain): a PodIdentityPolicy may allow <service>.<namespace>.svc and the same in this domain.")
	fs.IntVar(&o.Workers, "podcertificate-signer-signer-workers", o.Workers, "Concurrent signings.")
	fs.DurationVar(&o.CARotation, "podcertificate-signer-ca-rotation", o.CARotation, "Generate a new CA this often (0: never; a CA written to the Secret's next.crt/next.key still rotates in).")
	fs.DurationVar(&o.CAOverlap, "podcertificate-signer-ca-overlap", o.CAOverlap, "How long a new CA is published in the ClusterTrustBundle before it signs.")
	fs.Float64Var(&o.RefreshFraction, "podcertificate-signer-refresh-fraction", o.RefreshFraction, "Fraction of a certificate's lifetime after which kubelet refreshes it (beginRefreshAt), kept at least 10m after notBefore and 10m before notAfter as the API requires.")
	fs.DurationVar(&o.Backdate, "podcertificate-signer-backdate", o.Backdate, "How far notBefore lies before the signing, for clocks that run behind (at most 4m: the API requires notBefore within 5m of its own clock).")
	fs.DurationVar(&o.CanaryObservation, "podcertificate-signer-canary-observation", o.CanaryObservation, "Canary every next CA for this long before it goes live (0: no canary, "+
		"a next CA goes into the live bundle at once): it is published first in the ClusterTrustBundle <signer>:preview-bundle (k8s.spiffe.io/canarying=preview), which the "+
		"canaries load, and goes live once they have been observed this long with no CertificateOverdueForRefresh, no refusal of this signer and every leaf verifying.")
	fs.StringVar(&o.CanaryNamespaceSelector, "podcertificate-signer-canary-namespace-selector", o.CanaryNamespaceSelector, "Label selector of the namespaces whose pods are the canaries of a CA rotation.")
	fs.StringVar(&o.CanaryNodeSelector, "podcertificate-signer-canary-node-selector", o.CanaryNodeSelector, "Label selector of the nodes whose pods are the canaries of a CA rotation.")
	// The names before the flags carried the controller's name (v0.1): they still work,
	// and say once that they are deprecated.
	for _, suffix := range []string{"signer-name", "ca-namespace", "ca-secret", "max-lifetime", "key-types", "trust-domain", "signer-workers", "ca-rotation", "ca-overlap", "refresh-fraction", "backdate"} {
		manager.DeprecatedAlias(fs, "podcert-"+suffix, Name+"-"+suffix)
	}
}

// MaxBackdate leaves a minute of skew between the signer's clock and the API server's,
// which refuses a notBefore more than 5 minutes from its own.
const MaxBackdate = 4 * time.Minute

// Validate checks the options before anything connects: the API's minimum lifetime and
// notBefore window, a refresh inside the lifetime, and a CA rotation that fits the
// longest leaf.
func (o Options) Validate() error {
	if o.MaxLifetime < time.Hour {
		return fmt.Errorf("--podcertificate-signer-max-lifetime must be at least 1h, not %v", o.MaxLifetime)
	}
	if !(o.RefreshFraction > 0 && o.RefreshFraction < 1) {
		return fmt.Errorf("--podcertificate-signer-refresh-fraction must be between 0 and 1 (exclusive), not %v", o.RefreshFraction)
	}
	if o.Backdate < 0 || o.Backdate > MaxBackdate {
		return fmt.Errorf("--podcertificate-signer-backdate must be between 0 and %v, not %v", MaxBackdate, o.Backdate)
	}
	if err := validTrustDomain(o.TrustDomain); err != nil {
		return fmt.Errorf("--podcertificate-signer-trust-domain %q is not a SPIFFE trust domain: %w", o.TrustDomain, err)
	}
	if errs := validation.IsDNS1123Subdomain(o.ClusterDomain); len(errs) > 0 {
		return fmt.Errorf("--podcertificate-signer-cluster-domain %q: %s", o.ClusterDomain, strings.Join(errs, "; "))
	}
	if _, err := o.withSelectors(); err != nil {
		return err
	}
	return o.rotationPolicy().Validate()
}

// validTrustDomain is go-spiffe's rule for a trust domain name (lower-case letters,
// digits, '.', '-' and '_'), the name alone: every SPIFFE ID the signer writes,
// spiffe://<domain>/ns/<ns>/sa/<sa>, must then parse for its peers.
func validTrustDomain(name string) error {
	if strings.Contains(name, "/") || strings.Contains(name, ":") {
		return errors.New("write the name alone, such as cluster.local, without spiffe:// or a path")
	}
	if _, err := spiffeid.TrustDomainFromString(name); err != nil {
		return fmt.Errorf("%w; such as cluster.local", err)
	}
	// It is also the value of the bundle's k8s.spiffe.io/*-trust-domain labels.
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return fmt.Errorf("it labels the ClusterTrustBundle (k8s.spiffe.io/workload-trust-domain): %s", strings.Join(errs, "; "))
	}
	return nil
}

// Policy is what the options say about each certificate.
func (o Options) Policy() Policy {
	policy := Policy{MaxLifetime: o.MaxLifetime, KeyTypes: map[string]bool{}, TrustDomain: o.TrustDomain,
		RefreshFraction: o.RefreshFraction, Backdate: o.Backdate}
	for _, kt := range o.KeyTypes {
		policy.KeyTypes[kt] = true
	}
	return policy
}

func (o Options) rotationPolicy() podcert.RotationPolicy {
	return podcert.RotationPolicy{Every: o.CARotation, Overlap: o.CAOverlap, MaxLifetime: o.MaxLifetime, Observation: o.CanaryObservation}
}

// withSelectors is o with its canary selectors parsed.
func (o Options) withSelectors() (Options, error) {
	var err error
	if o.canaryNamespaces, err = parseSelector("podcertificate-signer-canary-namespace-selector", o.CanaryNamespaceSelector); err != nil {
		return o, err
	}
	if o.canaryNodes, err = parseSelector("podcertificate-signer-canary-node-selector", o.CanaryNodeSelector); err != nil {
		return o, err
	}
	return o, nil
}
