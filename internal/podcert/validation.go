package podcert

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KeyTypes are the key types a podCertificate projection may ask for (the API's list).
var KeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// ValidateProjection checks a projection's signer name and key type as kube-apiserver
// checks a podCertificate volume source, with its words. The API server refuses such pods,
// so for volumes this catches only what an older or newer API server let in; a projection
// the node agent makes from pod annotations is checked by nobody else.
func ValidateProjection(fldPath *field.Path, src *corev1.PodCertificateProjection) field.ErrorList {
	errs := ValidateSignerName(fldPath.Child("signerName"), src.SignerName)
	return append(errs, ValidateKeyType(fldPath.Child("keyType"), src.KeyType)...)
}

// ValidateKeyType refuses a key type the manager cannot generate.
func ValidateKeyType(fldPath *field.Path, keyType string) field.ErrorList {
	for _, known := range KeyTypes {
		if keyType == known {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, keyType, KeyTypes)}
}

// ValidateSignerName is kube-apiserver's check of a signer name (k8s.io/kubernetes
// pkg/apis/core/validation.ValidateSignerName, which this module does not import): a
// domain of at least two DNS labels, one '/', and a path of DNS subdomains.
func ValidateSignerName(fldPath *field.Path, signerName string) field.ErrorList {
	if signerName == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	domain, path, ok := strings.Cut(signerName, "/")
	if !ok || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(fldPath, signerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(fldPath, "", validation.DNS1123SubdomainMaxLength))
	}
	// Only the first bad label of each part is reported: the others would repeat it.
	domainLabels := strings.Split(domain, ".")
	errs = append(errs, firstBadLabel(fldPath, domain, domainLabels, validation.IsDNS1123Label)...)
	if len(domainLabels) < 2 {
		errs = append(errs, field.Invalid(fldPath, domain, "should be a domain with at least two segments separated by dots"))
	}
	errs = append(errs, firstBadLabel(fldPath, path, strings.Split(path, "."), validation.IsDNS1123Subdomain)...)
	maxLength := validation.DNS1123SubdomainMaxLength + 1 + validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1
	if len(signerName) > maxLength {
		errs = append(errs, field.TooLong(fldPath, "", maxLength))
	}
	return errs
}

func firstBadLabel(fldPath *field.Path, segment string, labels []string, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	for _, label := range labels {
		for _, msg := range check(label) {
			errs = append(errs, field.Invalid(fldPath, segment, fmt.Sprintf("validating label %q: %s", label, msg)))
		}
		if len(errs) > 0 {
			return errs
		}
	}
	return nil
}
