package jwks

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// applyNginx applies (or, when disabled, removes) the nginx ConfigMap, Deployment and
// Service, and reverts what others changed in the fields it owns.
func (r *Reconciler) applyNginx(ctx context.Context, s *scope) (ctrl.Result, error) {
	cfg := s.cfg
	if !jwkset.NginxEnabled(cfg) {
		if !Finalizer.Held(cfg) {
			// Never served by nginx: the finalizer is written before any nginx object is
			// made (deletionHasWork) and stays until deletion. Three cache lookups that
			// find nothing cost every nginx-off reconcile ~10 KB of garbage.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.deleteOwned(ctx, r.Owned, cfg, nginxObjects(cfg)...)
	}
	objs := desiredNginx(cfg, r.NginxImage)
	for i, obj := range objs {
		current, err := r.claim(ctx, cfg, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		if current != nil && !r.drifted(current, obj) {
			continue
		}
		if err := r.apply(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
		if i == 0 {
			cfg.Status.NginxConfigUpdated = &metav1.Time{Time: s.now}
		}
	}
	return ctrl.Result{}, nil
}
