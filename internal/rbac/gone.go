package rbac

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IgnoreIfGone reads a refused write: the aggregation controllers may not create roles,
// so a forced apply of a role deleted since their cache saw it is Forbidden. live (the API
// server, not the cache, which can still hold the role) says whether key is gone: then
// the sync is over, as upstream's ends on NotFound; otherwise forbidden is a real lack of
// permission and is returned for a rate-limited retry.
func IgnoreIfGone(ctx context.Context, live client.Reader, obj client.Object, key client.ObjectKey, forbidden error) error {
	err := live.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("%w (and checking whether it still exists: %w)", forbidden, err)
	default:
		return forbidden
	}
}
