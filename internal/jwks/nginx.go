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
