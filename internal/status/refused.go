package status

import "errors"

// Refused reports a write the API server refuses for good with a reason of the
// controller's own (a garden's 403 is GardenForbidden rather than Forbidden): Stalled=True
// and Ready=False with reason, a Warning event when new, and yet retried with backoff, as
// RBAC, quota and policy change outside the object. An outcome err already carries wins
// over reason. nil stays nil.
func Refused(reason string, err error) error {
	if err == nil {
		return nil
	}
	if e := (*Error)(nil); errors.As(err, &e) && e.kind != refused {
		return err
	}
	return &Error{kind: refused, reason: reason, err: err}
}
