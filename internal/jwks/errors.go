package jwks

import "fmt"

// Reasons of permanent input errors. They become the Ready condition's reason, so they
// are CamelCase and stable.
const (
	ReasonMissingCertificate  = "MissingCertificate"
	ReasonMissingPrivateKey   = "MissingPrivateKey"
	ReasonInvalidPEM          = "InvalidPEM"
	ReasonNotACertificate     = "NotACertificate"
	ReasonInvalidCertificate  = "InvalidCertificate"
	ReasonUnsupportedKey      = "UnsupportedKeyType"
	ReasonWeakKey             = "WeakKey"
	ReasonCertificateExpired  = "CertificateExpired"
	ReasonInvalidAlgorithm    = "InvalidAlgorithm"
	ReasonInvalidPublished    = "InvalidPublishedSet"
	ReasonSetTooLarge         = "SetTooLarge"
	ReasonCertificateTooLarge = "CertificateTooLarge"
)

// InputError is a permanent problem with the input: retrying without a change to the
// Secret or the spec cannot succeed. Its message never contains key material.
type InputError struct {
	Reason  string
	Message string
}

func (e *InputError) Error() string { return e.Message }

func inputErrorf(reason, format string, args ...any) *InputError {
	return &InputError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
