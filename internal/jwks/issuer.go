package jwks

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// claimIssuer makes the JWKSConfig the holder of spec.issuer and lets go of any other
// issuer it held (internal/jwks/issuerclaim): an issuer that is not free is IssuerInUse
// or IssuerNotAllowed, and nothing is published.
func (r *Reconciler) claimIssuer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if jwkset.IssuerKeyOf(s.cfg) == "" && !Finalizer.Held(s.cfg) {
		// Never held a claim: the finalizer is written before the first one
		// (deletionHasWork) and stays until deletion, so there is none to release, and
		// no list of the claims to make on every reconcile of a set without an issuer.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Claims.Claim(ctx, r.Client, s.cfg, s.now)
}
