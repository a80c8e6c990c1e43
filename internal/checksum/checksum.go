// Package checksum is Tengine-Ingress's secret global-consistency formula, and the
// incremental bookkeeping that keeps a namespace's checksum current without re-hashing
// every certificate when one secret changes. No Kubernetes client in here.
package checksum

import (
	"crypto/md5"  //nolint:gosec // the wire format is MD5; it detects drift, it does not authenticate
	"crypto/sha1" //nolint:gosec // PemSHA is defined as the SHA-1 fingerprint
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DefaultVersionAnnotation is where Tengine-Ingress reads a secret's version.
const DefaultVersionAnnotation = "nginx.ingress.kubernetes.io/version"

// Reasons a secret is left out of the checksum.
const (
	ReasonNoNumericID   = "NoNumericID"
	ReasonNoVersion     = "NoVersion"
	ReasonInvalidTLSCrt = "InvalidCertificate"
)

// LeftOut says why an object is not part of the checksum. Its message never contains
// key material.
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
		return "", &LeftOut{ReasonNoNumericID, fmt.Sprintf("name %q has no numeric ID after its last '-'", name)}
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return "", &LeftOut{ReasonNoNumericID, fmt.Sprintf("name %q: %q is not an integer ID", name, name[i+1:])}
	}
	return strconv.Itoa(n), nil
}

// Version is the integer value of the version annotation. Missing, empty, non-integer
// or 0 leave the object out.
func Version(annotations map[string]string, key string) (string, error) {
	raw, ok := annotations[key]
	if !ok || raw == "" {
		return "", &LeftOut{ReasonNoVersion, fmt.Sprintf("annotation %s is missing", key)}
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return "", &LeftOut{ReasonNoVersion, fmt.Sprintf("annotation %s=%q is not an integer", key, raw)}
	}
	if n == 0 {
		return "", &LeftOut{ReasonNoVersion, fmt.Sprintf("annotation %s is 0", key)}
	}
	return strconv.Itoa(n), nil
}

// PemSHA is the lower-case hex SHA-1 of the DER of the first (leaf) certificate in a PEM
// chain: the usual certificate fingerprint, not a hash of the PEM text.
func PemSHA(tlsCrt []byte) (string, error) {
	rest := tlsCrt
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return "", &LeftOut{ReasonInvalidTLSCrt, "tls.crt holds no PEM certificate"}
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return "", &LeftOut{ReasonInvalidTLSCrt, "tls.crt: " + err.Error()}
		}
		sum := sha1.Sum(block.Bytes) //nolint:gosec // see import
		return hex.EncodeToString(sum[:]), nil
	}
}

// SecretID is "<SecretID>-<Version>-<PemSHA>", or a *LeftOut saying why there is none.
func SecretID(name string, annotations map[string]string, versionKey string, tlsCrt []byte) (string, error) {
	id, err := NameID(name)
	if err != nil {
		return "", err
	}
	version, err := Version(annotations, versionKey)
	if err != nil {
		return "", err
	}
	sha, err := PemSHA(tlsCrt)
	if err != nil {
		return "", err
	}
	return id + "-" + version + "-" + sha, nil
}

// IngressID is "<ID>-<Version>" for an Ingress.
func IngressID(name string, annotations map[string]string, versionKey string) (string, error) {
	id, err := NameID(name)
	if err != nil {
		return "", err
	}
	version, err := Version(annotations, versionKey)
	if err != nil {
		return "", err
	}
	return id + "-" + version, nil
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
