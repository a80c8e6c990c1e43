// Package checksum is Tengine-Ingress's secret global-consistency formula, and the
// incremental bookkeeping that keeps a namespace's checksum current without re-hashing
// every certificate when one secret changes; also the names the control plane and the
// data-plane agent share (tracks, published kinds, annotations, scopes). No Kubernetes
// client in here.
package checksum

import (
	"crypto/md5"  //nolint:gosec // the wire format is MD5; it detects drift, it does not authenticate
	"crypto/sha1" //nolint:gosec // PemSHA is defined as the SHA-1 fingerprint
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

// DefaultVersionAnnotation is where Tengine-Ingress reads a secret's version.
const DefaultVersionAnnotation = tenginev1alpha1.VersionAnnotation

// The Secret data keys Tengine-Ingress reads (store/backend_ssl.go getPemCertificate).
const (
	KeyTLSCrt = "tls.crt"
	KeyTLSKey = "tls.key"
	KeyCACrt  = "ca.crt"
	KeyCACRL  = "ca.crl"
)

// SecretKeys are all the Secret data keys Tengine-Ingress reads: nothing else in a Secret
// counts.
var SecretKeys = [...]string{KeyTLSCrt, KeyTLSKey, KeyCACrt, KeyCACRL}

// LeftOut says why an object is not part of the checksum: its Reason is one of
// tenginev1alpha1's (ReasonNotVersioned, ReasonNoNumericID, …). Its message never
// contains key material.
type LeftOut struct {
	Reason  string
	Message string
}

func (l *LeftOut) Error() string { return l.Message }

// NameID is the numeric ID at the end of a name: the part after the last "-", parsed as
// a decimal integer and printed back ("x-007" → "7"). No "-", a trailing "-", or a
// non-integer last part leave the object out.
func NameID(name string) (string, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return "", &LeftOut{tenginev1alpha1.ReasonNoNumericID, fmt.Sprintf("name %q has no numeric ID after its last '-'", name)}
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return "", &LeftOut{tenginev1alpha1.ReasonNoNumericID, fmt.Sprintf("name %q: %q is not an integer ID", name, name[i+1:])}
	}
	return strconv.Itoa(n), nil
}

// Version is the integer value of the version annotation. Missing, empty, non-integer
// or 0 leave the object out; missing is tenginev1alpha1.ReasonNotVersioned, the others
// tenginev1alpha1.ReasonNoVersion.
func Version(annotations map[string]string, key string) (string, error) {
	raw, ok := annotations[key]
	if !ok {
		return "", &LeftOut{tenginev1alpha1.ReasonNotVersioned, fmt.Sprintf("annotation %s is missing", key)}
	}
	if raw == "" {
		return "", &LeftOut{tenginev1alpha1.ReasonNoVersion, fmt.Sprintf("annotation %s is empty", key)}
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return "", &LeftOut{tenginev1alpha1.ReasonNoVersion, fmt.Sprintf("annotation %s=%q is not an integer", key, abbreviate(raw))}
	}
	if n == 0 {
		return "", &LeftOut{tenginev1alpha1.ReasonNoVersion, fmt.Sprintf("annotation %s is 0", key)}
	}
	return strconv.Itoa(n), nil
}

// abbreviate bounds a tenant's value quoted in a message (an event, a log line): an
// annotation may be 256 KiB.
func abbreviate(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return strings.ToValidUTF8(s[:keep], "") + "…"
}

// PemSHA is the lower-case hex SHA-1 of the DER of the first PEM block of tls.crt, which
// must be a certificate (Tengine-Ingress's net/ssl CreateSSLCert reads the first block
// and refuses any other type): the usual certificate fingerprint, not a hash of the PEM.
func PemSHA(tlsCrt []byte) (string, error) {
	block, _ := pem.Decode(tlsCrt)
	if block == nil {
		return "", &LeftOut{tenginev1alpha1.ReasonInvalidTLSCrt, "tls.crt holds no PEM block"}
	}
	if block.Type != "CERTIFICATE" {
		return "", &LeftOut{tenginev1alpha1.ReasonInvalidTLSCrt, fmt.Sprintf("the first PEM block of tls.crt is a %s, not a CERTIFICATE", block.Type)}
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return "", &LeftOut{tenginev1alpha1.ReasonInvalidTLSCrt, "tls.crt: " + err.Error()}
	}
	sum := sha1.Sum(block.Bytes) //nolint:gosec // see import
	return hex.EncodeToString(sum[:]), nil
}

// SecretPemSHA is the PemSHA a Secret counts with, by the rules Tengine-Ingress keeps a
// Secret by (store/backend_ssl.go getPemCertificate, net/ssl CreateSSLCert, CreateCACert,
// CheckCACert, ConfigureCRL):
//
//   - tls.crt and tls.key both present: tls.crt's first block is a certificate, and the
//     pair loads (tls.X509KeyPair: the key is the certificate's); a ca.crt beside them must
//     parse, and with it a ca.crl. The PemSHA is the certificate's fingerprint.
//   - otherwise a ca.crt (with a ca.crl, that too) that parses: a CA-only Secret, which
//     counts with an empty PemSHA ("<id>-<version>-").
//   - anything else is left out.
func SecretPemSHA(data map[string][]byte) (string, error) {
	crt, hasCrt := data[KeyTLSCrt]
	key, hasKey := data[KeyTLSKey]
	ca, crl := data[KeyCACrt], data[KeyCACRL]
	if hasCrt && hasKey {
		sha, err := PemSHA(crt)
		if err != nil {
			return "", err
		}
		if _, err := tls.X509KeyPair(crt, key); err != nil {
			return "", &LeftOut{tenginev1alpha1.ReasonKeyMismatch, "tls.crt and tls.key do not load as a pair: " + err.Error()}
		}
		if len(ca) > 0 {
			if err := checkCA(ca, crl); err != nil {
				return "", err
			}
		}
		return sha, nil
	}
	if len(ca) > 0 {
		return "", checkCA(ca, crl)
	}
	return "", &LeftOut{tenginev1alpha1.ReasonNoKeyPair, "the Secret has neither a tls.crt and tls.key pair nor a ca.crt"}
}

// checkCA is Tengine-Ingress's CheckCACert (every PEM block a certificate, at least one)
// and, when there is a CRL, ConfigureCRL (its first block an X509 CRL that parses).
func checkCA(ca, crl []byte) error {
	n := 0
	for rest := ca; ; n++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return &LeftOut{tenginev1alpha1.ReasonInvalidCA, "ca.crt: " + err.Error()}
		}
	}
	if n == 0 {
		return &LeftOut{tenginev1alpha1.ReasonInvalidCA, "ca.crt holds no PEM certificate"}
	}
	if len(crl) == 0 {
		return nil
	}
	block, _ := pem.Decode(crl)
	if block == nil || block.Type != "X509 CRL" {
		return &LeftOut{tenginev1alpha1.ReasonInvalidCRL, "ca.crl does not start with an X509 CRL PEM block"}
	}
	if _, err := x509.ParseRevocationList(block.Bytes); err != nil {
		return &LeftOut{tenginev1alpha1.ReasonInvalidCRL, "ca.crl: " + err.Error()}
	}
	return nil
}

// SecretID is "<SecretID>-<Version>-<PemSHA>" for a Secret's name, annotations and data,
// or a *LeftOut saying why it has none.
func SecretID(name string, annotations map[string]string, versionKey string, data map[string][]byte) (string, error) {
	if _, err := nameAndVersion(name, annotations, versionKey); err != nil {
		return "", err
	}
	sha, err := SecretPemSHA(data)
	if err != nil {
		return "", err
	}
	return SecretIDWithPemSHA(name, annotations, versionKey, sha)
}

// SecretIDWithPemSHA is SecretID for a Secret whose PemSHA was computed already (the
// control plane keeps only that of each Secret, never its key).
func SecretIDWithPemSHA(name string, annotations map[string]string, versionKey, pemSHA string) (string, error) {
	prefix, err := nameAndVersion(name, annotations, versionKey)
	if err != nil {
		return "", err
	}
	return prefix + "-" + pemSHA, nil
}

// nameAndVersion is "<ID>-<Version>". The version is checked first, as Tengine-Ingress
// does: an object without one is not meant for the checksum at all.
func nameAndVersion(name string, annotations map[string]string, versionKey string) (string, error) {
	version, err := Version(annotations, versionKey)
	if err != nil {
		return "", err
	}
	id, err := NameID(name)
	if err != nil {
		return "", err
	}
	return id + "-" + version, nil
}

// IngressID is "<ID>-<Version>" for an Ingress.
func IngressID(name string, annotations map[string]string, versionKey string) (string, error) {
	return nameAndVersion(name, annotations, versionKey)
}

// Sum is the checksum of a list of IDs: sorted as plain strings, joined with ",", MD5,
// 32 lower-case hex characters. No IDs give the MD5 of the empty string.
func Sum(ids []string) string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	return sumSorted(sorted)
}

func sumSorted(sorted []string) string {
	h := md5.New() //nolint:gosec // see import
	for i, id := range sorted {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write([]byte(id))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Diff lists the IDs only in local and only in published (both sorted).
func Diff(local, published []string) (localOnly, publishedOnly []string) {
	count := map[string]int{}
	for _, id := range local {
		count[id]++
	}
	for _, id := range published {
		count[id]--
	}
	for id, n := range count {
		for ; n > 0; n-- {
			localOnly = append(localOnly, id)
		}
		for ; n < 0; n++ {
			publishedOnly = append(publishedOnly, id)
		}
	}
	sort.Strings(localOnly)
	sort.Strings(publishedOnly)
	return localOnly, publishedOnly
}

// IsLeftOut reports whether err says an object is left out (rather than failing).
func IsLeftOut(err error) (*LeftOut, bool) {
	var l *LeftOut
	ok := errors.As(err, &l)
	return l, ok
}
