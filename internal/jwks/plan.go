package jwks

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// planSet plans the next set and its document: jwkset.Plan under the spec's policy,
// within the size a ConfigMap can hold (retired keys leave early, oldest first, to fit).
// It asks to come back when a retired key is due to go, or when the current certificate
// expires (to report it).
func (r *Reconciler) planSet(_ context.Context, s *scope) (ctrl.Result, error) {
	policy := jwkset.PolicyOf(s.cfg)
	policy.Signing = s.keep
	next, nextRemoval := jwkset.Plan(s.key, s.previous, policy, s.now)
	kept, doc, err := jwkset.MarshalWithin(next, jwkset.MaxDocumentBytes)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(kept) < len(next) {
		// The removal that was due may belong to a key that no longer fits.
		nextRemoval = jwkset.EarliestRemoval(kept, policy.OldKeysTTL)
	}
	s.next, s.doc, s.nextRemoval = kept, doc, nextRemoval
	return ctrl.Result{RequeueAfter: nextWakeUp(s.now, nextRemoval, s.key.NotAfter)}, nil
}

// nextWakeUp is when to reconcile again with no other change: when a retired key is due
// to go, or when the current certificate expires (to report it).
func nextWakeUp(now, nextRemoval, notAfter time.Time) time.Duration {
	wake := notAfter.Add(time.Second)
	if !nextRemoval.IsZero() && nextRemoval.Before(wake) {
		wake = nextRemoval
	}
	if d := wake.Sub(now); d > 0 {
		return d
	}
	return time.Second
}
