package jwks

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// scope is one publication of a JWKSConfig: what its phases read, decide and write. Each
// phase fills in what the phases after it read; none reads what a later one fills in.
type scope struct {
	cfg *jwksv1alpha1.JWKSConfig
	// id names the JWKSConfig.
	id types.NamespacedName
	// now is the time of the reconcile, to the second.
	now time.Time

	// key is the current certificate's key (readSecret).
	key jwkset.Key
	// current is the JWKS ConfigMap spec.configMapName names, nil while there is none;
	// previous are the keys published before, read from it or, right after a rename, from
	// the ConfigMap the set moves from (readPublished).
	current  *corev1.ConfigMap
	previous []jwkset.PublishedKey
	// signing is the kid in spec.signingSecret ("" without one); keep the kid the plan
	// keeps as the signing key ("" when none is kept); promoteAtOnce whether the current
	// key is copied to the signing Secret as soon as it is served (readSigning).
	signing, keep string
	promoteAtOnce bool
	// next is the set to publish, current key first; doc its document; nextRemoval when
	// its next retired key is due to go (planSet).
	next        []jwkset.PublishedKey
	doc         []byte
	nextRemoval time.Time
}

// phase is one step of a publication. An error ends the publication (the status tells
// it); a phase that wants to run again later says when in its result.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// publish computes the set for the current certificate and makes the cluster match it,
// phase by phase. It comes back at the earliest time a phase asks for: when a retired key
// is due to go or the certificate expires (planSet), when a key is due to be promoted
// (promote).
func (r *Reconciler) publish(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (ctrl.Result, error) {
	s := &scope{cfg: cfg, id: types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}, now: now}
	phases := []phase{
		r.checkSpec,     // spec.go: refuse what admission would, and what is over the operator's limits
		r.claimIssuer,   // issuer.go: hold spec.issuer's claim, release the others
		r.readSecret,    // secret.go: the current key, from certificateSecret
		r.readPublished, // configmap.go: the set published before
		r.readSigning,   // signing.go: the key signers use, and which key the plan keeps for them
		r.planSet,       // plan.go: the next set and its document
		r.writeSet,      // configmap.go: write the set when it changed (throttled), refresh nginx's pods
		r.removeRenamed, // configmap.go: delete the set left under an old spec.configMapName
		r.applyNginx,    // nginx.go: nginx's ConfigMap, Deployment and Service, or none
		r.recordKeys,    // status.go: status.keys and the set's metrics
		r.checkServed,   // status.go: wait until trustplane's server and nginx serve the set
		r.promote,       // signing.go: copy the served key to spec.signingSecret when due
	}
	var result ctrl.Result
	for _, run := range phases {
		res, err := run(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		result = earliest(result, res)
	}
	return result, nil
}

// earliest merges two phases' results: the earliest RequeueAfter that is set.
func earliest(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter {
		return b
	}
	return a
}
