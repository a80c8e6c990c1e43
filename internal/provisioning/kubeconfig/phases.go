package kubeconfig

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// scope is one reconcile of a request, as its phases share it.
type scope struct {
	kr      *operatorv1alpha1.KubeconfigRequest
	patcher *status.Patcher
	now     time.Time
	// firstSpec: the spec never changed and no status was ever stored, so the request can
	// hold only what this very spec asks for, if anything.
	firstSpec bool
	// key is the Cluster the spec names; cluster is it, nil when it does not exist.
	key     types.NamespacedName
	cluster *operatorv1alpha1.Cluster
	// held is the Cluster the request's grants live in, nil when none.
	held *types.NamespacedName
	// target is the connection to the Cluster's target cluster.
	target *clustertarget.Target
	// moved says how the target's endpoint differs from the published kubeconfig's.
	moved string
	// done ends the reconcile after the phase that set it.
	done bool
}

// phase is one step of a reconcile. A phase ends the reconcile when it returns an error
// or a result, or sets scope.done; otherwise the next one runs.
type phase struct {
	name string
	run  func(ctx context.Context, s *scope) (reconcile.Result, error)
}

// phases are the steps of a reconcile, in order: what the request may be granted at all
// (this file), what it holds elsewhere (withdraw.go), the grants in the target
// (grant.go), and the kubeconfig (issue.go).
func (r *Reconciler) phases() []phase {
	return []phase{
		{"record", r.record},
		{"ceiling", r.checkCeiling},
		{"expiration", r.checkExpiration},
		{"revoke", r.revokeIfAsked},
		{"cluster", r.readCluster},
		{"withdraw-previous", r.withdrawFromPrevious},
		{"connect", r.connect},
		{"pod-security", r.checkPodSecurity},
		{"record-grant", r.recordGrant},
		{"grant", r.grantPhase},
		{"revoke-credential", r.revokeCredentialIfAsked},
		{"issue", r.issuePhase},
	}
}

// record stores the target name with this reconcile's status (the same in every
// reconcile until then), and admission's record of the Cluster at creation.
func (r *Reconciler) record(_ context.Context, s *scope) (reconcile.Result, error) {
	kr := s.kr
	kr.Status.TargetName = access.TargetName(kr)
	s.firstSpec = !kr.StatusStored() && kr.Generation <= 1
	// The record admission made at creation counts only until a status is stored, so it
	// goes into status.grantedIn with the first one: whatever that status says. Otherwise
	// a reconcile that granted and died before its status write, followed by one that
	// stored a status before granting (the target down, the Cluster unreadable), left the
	// grants recorded nowhere, and the request's deletion left them in the target (found
	// by the chaos suite: "kubeconfig: no orphan in target").
	if recorded, ok := kr.ClusterAtCreation(); ok && kr.Status.GrantedIn == nil {
		kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: recorded.Namespace, Name: recorded.Name}
	}
	backfillCredentials(kr)
	return reconcile.Result{}, nil
}

// checkCeiling denies rules beyond the ceiling: a ClusterRole's rules reach every
// namespace, a Role's only its own.
func (r *Reconciler) checkCeiling(ctx context.Context, s *scope) (reconcile.Result, error) {
	if problems := r.opts.ceiling().CheckRequest(s.kr.Spec); len(problems) > 0 {
		s.done = true
		return reconcile.Result{}, r.deny(ctx, s.kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: %s", strings.Join(problems, "; ")))
	}
	return reconcile.Result{}, nil
}

// checkExpiration denies a lifetime longer than --kubeconfig-max-expiration.
func (r *Reconciler) checkExpiration(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr := s.kr
	if limit := r.opts.MaxExpiration; time.Duration(kr.Spec.Expiration)*time.Second > limit {
		s.done = true
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonExpirationTooLong, fmt.Sprintf("denied: spec.expiration %ds is longer than this operator issues (%ds, --kubeconfig-max-expiration=%s)",
			kr.Spec.Expiration, int64(limit/time.Second), limit))
	}
	return reconcile.Result{}, nil
}

// revokeIfAsked revokes the kubeconfig while revoke is "true" (withdraw.go).
func (r *Reconciler) revokeIfAsked(ctx context.Context, s *scope) (reconcile.Result, error) {
	if s.kr.Annotations[operatorv1alpha1.RevokeAnnotation] != "true" {
		return reconcile.Result{}, nil
	}
	s.done = true
	return reconcile.Result{}, r.revoke(ctx, s.kr)
}

// readCluster reads the Cluster the spec names, and denies a Cluster in another
// namespace that does not grant the request's; the Cluster watch brings the request back
// when its grant changes.
func (r *Reconciler) readCluster(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr := s.kr
	s.key = kr.ClusterKey()
	s.cluster = &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, s.key, s.cluster); apierrors.IsNotFound(err) {
		s.cluster = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading Cluster %s: %w", s.key, err)
	}
	if s.cluster != nil && !s.cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
		s.done = true
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: Cluster %s does not grant KubeconfigRequests from namespace %s: its spec.kubeconfigRequestNamespaces must list %q", s.key, kr.Namespace, kr.Namespace))
	}
	s.held = grantedIn(kr)
	return reconcile.Result{}, nil
}
