package jwks

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// claimIssuer makes the JWKSConfig the holder of spec.issuer and lets go of any other
// issuer it held (internal/jwks/issuerclaim): an issuer that is not free is IssuerInUse
// or IssuerNotAllowed, and nothing is published.
func (r *Reconciler) claimIssuer(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, r.Claims.Claim(ctx, r.Client, s.cfg, s.now)
}
