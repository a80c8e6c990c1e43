package tlsexpiry

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

const (
	stateInvalid  = "invalid"
	stateTooLarge = "too_large"

	problemInvalid  = "invalid"
	problemTooLarge = "too-large"

	// certificateAnnotation carries, on the cached copy only, what strip derived from the
	// Secret's tls.crt; macAnnotation proves that strip wrote it (see certificateOf).
	certificateAnnotation = "tls-expiry.trustplane.io/certificate"
	macAnnotation         = "tls-expiry.trustplane.io/mac"
)

// certificate is all the controller keeps of a Secret's tls.crt: a few dozen bytes
// instead of the certificate (or whatever else a tenant puts under that key).
type certificate struct {
	// SHA256 of tls.crt, hex: a new value is a new certificate (its warnings may come
	// again).
	SHA256 string `json:"sha256"`
	// Bytes is the size of tls.crt.
	Bytes int `json:"bytes"`
	// NotBefore and NotAfter are the leaf's, when Problem is empty.
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	// Problem is problemTooLarge (not parsed) or problemInvalid (no certificate parses).
	Problem string `json:"problem,omitempty"`
}

// derive reads what the controller needs from a tls.crt; above maxBytes it is only
// hashed, never parsed.
func derive(crt []byte, maxBytes int) certificate {
	sum := sha256.Sum256(crt)
	c := certificate{SHA256: hex.EncodeToString(sum[:]), Bytes: len(crt)}
	if len(crt) > maxBytes {
		c.Problem = problemTooLarge
		return c
	}
	leaf, err := leafOf(crt)
	if err != nil {
		c.Problem = problemInvalid
		return c
	}
	c.NotBefore, c.NotAfter = leaf.NotBefore, leaf.NotAfter
	return c
}

// macKey authenticates the certificate annotation for this process only: a Secret
// somebody annotated themselves is never taken for one this process stripped.
var macKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand panics rather than return an error)
	return k
}()

func mac(uid string, value string) string {
	h := hmac.New(sha256.New, macKey)
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return hex.EncodeToString(h.Sum(nil))
}

// Transform is the cache transform: it replaces a Secret's data by what derive reads from
// its tls.crt, so the cache retains neither the certificate nor the key (nor any other
// key of the Secret), whatever their size. It also drops every other annotation —
// kubectl's last-applied-configuration holds the whole Secret, key included — and the
// managed fields.
func Transform(maxBytes int) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		if s.Data == nil && stripped(s) {
			return s, nil // the informer may transform an object twice
		}
		strip(s, maxBytes)
		return s, nil
	}
}

func strip(s *corev1.Secret, maxBytes int) {
	raw, _ := json.Marshal(derive(s.Data[corev1.TLSCertKey], maxBytes)) // a struct of strings, ints and times
	value := string(raw)
	s.Data, s.StringData, s.ManagedFields = nil, nil, nil
	s.Annotations = map[string]string{certificateAnnotation: value, macAnnotation: mac(string(s.UID), value)}
}

// stripped says the Secret's certificate annotation was written by this process's strip.
func stripped(s *corev1.Secret) bool {
	value, ok := s.Annotations[certificateAnnotation]
	return ok && hmac.Equal([]byte(s.Annotations[macAnnotation]), []byte(mac(string(s.UID), value)))
}

// certificateOf is what is known of the Secret's tls.crt: what strip recorded when it
// went through the cache, or derived now when it comes whole (from an uncached reader).
func certificateOf(s *corev1.Secret, maxBytes int) certificate {
	if s.Data == nil && stripped(s) {
		var c certificate
		if err := json.Unmarshal([]byte(s.Annotations[certificateAnnotation]), &c); err == nil {
			return c
		}
	}
	return derive(s.Data[corev1.TLSCertKey], maxBytes)
}
