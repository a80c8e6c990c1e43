package jwks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/status"
)

// The reads and writes every phase shares: which existing object is this JWKSConfig's
// (claim), whether it drifted, the apply with the controller's field owner, and the
// delete of what it made.

// claim returns the existing object named like obj if it is this JWKSConfig's (it
// carries OwnerLabel with this JWKSConfig's name), or nil when there is none. One made for
// another JWKSConfig, or by anyone else, is never adopted, overwritten or deleted: that
// is NameInUse, until its name is freed or it is labelled over to this JWKSConfig.
func (r *Reconciler) claim(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, obj client.Object) (client.Object, error) {
	return r.claimAsking(ctx, cfg, obj, true)
}

// claimAsking is claim; when askServer is false, an object the private cache does not
// hold is taken to be absent.
func (r *Reconciler) claimAsking(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, obj client.Object, askServer bool) (client.Object, error) {
	current := obj.DeepCopyObject().(client.Object)
	key := client.ObjectKeyFromObject(obj)
	err := r.Owned.Get(ctx, key, current)
	if apierrors.IsNotFound(err) && askServer {
		// The private cache holds only labelled objects: ask the API server whether an
		// unlabelled one (someone else's) is in the way, or ours is not cached yet.
		err = r.APIReader.Get(ctx, key, current)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if err != nil {
		return nil, fmt.Errorf("getting %s %s: %w", kind, key.Name, err)
	}
	if owner := current.GetLabels()[jwksv1alpha1.OwnerLabel]; owner != cfg.Name {
		whose := "was not made by trustplane"
		if owner != "" {
			whose = fmt.Sprintf("belongs to JWKSConfig %q", owner)
		}
		return nil, status.Stalled(jwksv1alpha1.ReasonNameInUse,
			"%s %q already exists and %s; it is left untouched: choose another name, delete it, or label it %s=%s to hand it over",
			kind, key.Name, whose, jwksv1alpha1.OwnerLabel, cfg.Name)
	}
	return current, nil
}

// apply server-side applies obj with the controller's field owner (obj's resourceVersion,
// when set, is a precondition), and leaves the version written in obj's resourceVersion.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	u, err := apply.Configuration(r.Client, obj)
	if err != nil {
		return err
	}
	u.SetResourceVersion(obj.GetResourceVersion()) // a precondition when set
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return status.WriteFailed("apply", u, err)
	}
	obj.SetResourceVersion(u.GetResourceVersion())
	apiWrites.WithLabelValues(u.GetKind()).Inc()
	return nil
}

// drifted says whether applying desired would change current: a field this controller
// set differs, was changed or removed by someone else (the field then belongs to them,
// as server-side apply records it), or is not set yet.
func (r *Reconciler) drifted(current, desired client.Object) bool {
	drifted, err := apply.Drifted(r.Client, current, desired, FieldOwner)
	return err != nil || drifted
}

func ptrTo[T any](v T) *T { return &v }

// deleteOwned deletes objects that carry this JWKSConfig's owner label; an object of
// the same name that someone else made is never deleted. It looks them up with from:
// the cache on the steady path, the API server when finalizing (an object the cache
// has not seen yet must not be left behind).
func (r *Reconciler) deleteOwned(ctx context.Context, from client.Reader, cfg *jwksv1alpha1.JWKSConfig, objs ...client.Object) error {
	for _, obj := range objs {
		current := obj.DeepCopyObject().(client.Object)
		if err := from.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting %T %s: %w", obj, obj.GetName(), err)
		}
		if current.GetLabels()[jwksv1alpha1.OwnerLabel] != cfg.Name {
			continue
		}
		precondition := client.Preconditions{UID: ptr.To(current.GetUID())}
		if err := r.Client.Delete(ctx, current, precondition); client.IgnoreNotFound(err) != nil {
			return status.WriteFailed("delete", current, err)
		}
	}
	return nil
}
