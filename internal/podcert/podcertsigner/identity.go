package podcertsigner

import (
	"crypto/x509"
	"fmt"
	"slices"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/trustplane/trustplane/api/certificates"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
)

// Identity is what a certificate carries besides its SPIFFE ID, the one URI SAN.
type Identity struct {
	// DNSNames are the DNS SANs, sorted.
	DNSNames []string
	// ExtKeyUsages are the extended key usages.
	ExtKeyUsages []x509.ExtKeyUsage
}

// defaultExtKeyUsages are a certificate's without a policy: a workload both serves and
// calls over mutual TLS.
var defaultExtKeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}

// IdentityOf is what a pod of namespace running as serviceAccount gets in a certificate
// from signerName: the DNS names the namespace's PodIdentityPolicies allow that
// ServiceAccount (narrowed to those the request asks for in its unverifiedUserAnnotations),
// and the extended key usages of the first policy (by name) that sets them. A policy of
// another namespace or signer counts for nothing, and neither does a name outside the
// namespace that got past admission. A request asking for a name no policy allows, or
// carrying a podcert.trustplane.io/ annotation the signer does not know, is a *Denial: a
// pod can narrow what the operator allowed, never widen it.
func IdentityOf(policies []podcertv1alpha1.PodIdentityPolicy, signerName, clusterDomain, namespace, serviceAccount string, annotations map[string]string) (Identity, *Denial) {
	// A key of this signer's own domain that it does not read is a mistake the pod's author
	// must hear of (the API asks signers to deny those); keys of other domains are for
	// others (a pod's tooling, an audit) and never reach a certificate, so they are
	// ignored: denying them would break pods that carried them before.
	for key := range annotations {
		if strings.HasPrefix(key, certificates.UserAnnotationPrefix) && key != certificates.DNSNamesAnnotation {
			return Identity{}, &Denial{certificatesv1.PodCertificateRequestConditionInvalidUserConfig,
				fmt.Sprintf("unverifiedUserAnnotations key %q is not one this signer reads (only %s)", key, certificates.DNSNamesAnnotation)}
		}
	}
	allowed, ekus := allowedFor(policies, signerName, clusterDomain, namespace, serviceAccount)
	id := Identity{DNSNames: allowed, ExtKeyUsages: defaultExtKeyUsages}
	if ekus != nil {
		id.ExtKeyUsages = ekus
	}
	requested, asked := annotations[certificates.DNSNamesAnnotation]
	if !asked {
		return id, nil
	}
	id.DNSNames = nil
	for _, name := range strings.Split(requested, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(allowed, name) {
			return Identity{}, &Denial{certificatesv1.PodCertificateRequestConditionInvalidUserConfig,
				fmt.Sprintf("DNS name %q (%s) is not allowed for ServiceAccount %s by any PodIdentityPolicy of namespace %s", name, certificates.DNSNamesAnnotation, serviceAccount, namespace)}
		}
		if !slices.Contains(id.DNSNames, name) {
			id.DNSNames = append(id.DNSNames, name)
		}
	}
	sort.Strings(id.DNSNames)
	return id, nil
}

// allowedFor is the union of the DNS names the policies allow serviceAccount, sorted, and
// the extended key usages of the first policy by name that sets them (nil: none does).
func allowedFor(policies []podcertv1alpha1.PodIdentityPolicy, signerName, clusterDomain, namespace, serviceAccount string) ([]string, []x509.ExtKeyUsage) {
	sorted := slices.Clone(policies)
	slices.SortFunc(sorted, func(a, b podcertv1alpha1.PodIdentityPolicy) int { return strings.Compare(a.Name, b.Name) })
	var names []string
	var ekus []x509.ExtKeyUsage
	for _, p := range sorted {
		signer := p.Spec.SignerName
		if signer == "" {
			signer = podcertv1alpha1.DefaultSignerName
		}
		if p.Namespace != namespace || signer != signerName {
			continue
		}
		for _, sa := range p.Spec.ServiceAccounts {
			if sa.Name != serviceAccount {
				continue
			}
			for _, name := range sa.DNSNames {
				if ServiceNameOf(name, namespace, clusterDomain) && !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			if ekus == nil && len(sa.ExtendedKeyUsages) > 0 {
				ekus = extKeyUsagesOf(sa.ExtendedKeyUsages)
			}
		}
	}
	sort.Strings(names)
	return names, ekus
}

// ServiceNameOf says whether name is a DNS name of a Service of namespace (or of a pod
// behind a headless one): <...>.<namespace>.svc, or the same in clusterDomain. The
// trustplane-pod-identity-policies admission policy, which cannot know the cluster
// domain, admits <...>.<namespace>.svc.<any domain>; this is the exact rule.
func ServiceNameOf(name, namespace, clusterDomain string) bool {
	for _, suffix := range []string{"." + namespace + ".svc", "." + namespace + ".svc." + clusterDomain} {
		if prefix, ok := strings.CutSuffix(name, suffix); ok && prefix != "" && !strings.HasPrefix(prefix, ".") && !strings.Contains(prefix, "*") {
			return true
		}
	}
	return false
}

func extKeyUsagesOf(usages []podcertv1alpha1.ExtendedKeyUsage) []x509.ExtKeyUsage {
	var out []x509.ExtKeyUsage
	for _, u := range usages {
		switch u {
		case podcertv1alpha1.ExtendedKeyUsageClientAuth:
			out = append(out, x509.ExtKeyUsageClientAuth)
		case podcertv1alpha1.ExtendedKeyUsageServerAuth:
			out = append(out, x509.ExtKeyUsageServerAuth)
		}
	}
	if len(out) == 0 { // only values admission would have refused: as without a policy
		return defaultExtKeyUsages
	}
	return out
}
