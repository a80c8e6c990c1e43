package jwkset

import "fmt"

// InputError is a permanent problem with the input: retrying without a change to the
// Secret or the spec cannot succeed. Its message never contains key material. Its Reason
// is one of api/jwks/v1alpha1's input reasons (ReasonMissingCertificate, …), which
// becomes the Ready condition's reason.
type InputError struct {
	Reason  string
	Message string
}

func (e *InputError) Error() string { return e.Message }

func inputErrorf(reason, format string, args ...any) *InputError {
	return &InputError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
