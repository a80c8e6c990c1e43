package jwks

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// finalize removes what the JWKSConfig made, lets go of its issuer, then removes its
// finalizer.
func (r *Reconciler) finalize(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) error {
	if !Finalizer.Held(cfg) {
		return nil
	}
	if err := r.deleteOwned(ctx, r.APIReader, cfg, deletedObjects(cfg, r.NginxImage)...); err != nil {
		return err
	}
	if err := r.Claims.Release(ctx, r.Client, cfg, "", r.Clock.Now()); err != nil {
		return err
	}
	if err := Finalizer.Release(ctx, r.Client, cfg); err != nil {
		return err
	}
	r.forget(types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name})
	return nil
}
