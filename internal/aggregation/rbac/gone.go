package rbac

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// IgnoreIfGone reads a refused write: the aggregation controllers may not create roles,
// so a forced apply of a role deleted since their cache saw it is Forbidden. recheck is
// the error of reading the role again from the API server (not from the cache, which can
// still hold it): NotFound says the role is gone, and the sync is over, as upstream's ends
// on NotFound; otherwise forbidden is a real lack of permission and is returned for a
// rate-limited retry.
func IgnoreIfGone(forbidden, recheck error) error {
	switch {
	case apierrors.IsNotFound(recheck):
		return nil
	case recheck != nil:
		return fmt.Errorf("%w (and checking whether it still exists: %w)", forbidden, recheck)
	default:
		return forbidden
	}
}
