package jwks

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// stallOnInputError reports a certificate or set that cannot be published as Stalled: only
// a change to the Secret (or the spec) can fix it, and the Secret watch brings the
// JWKSConfig back when it changes. Other errors pass unchanged.
func (r *Reconciler) stallOnInputError(err error) error {
	var ie *jwkset.InputError
	if !errors.As(err, &ie) {
		return err
	}
	inputErrors.WithLabelValues(ie.Reason).Inc()
	return status.Stalled(ie.Reason, "%s; the published set is unchanged", ie.Message)
}

// recordKeys records the set in status.keys and in the set's metrics.
func (r *Reconciler) recordKeys(_ context.Context, s *scope) (ctrl.Result, error) {
	setKeyStatus(s.cfg, s.next)
	publishedKeys.WithLabelValues(s.cfg.Namespace, s.cfg.Name).Set(float64(len(s.next)))
	certificateNotAfter.WithLabelValues(s.cfg.Namespace, s.cfg.Name).Set(float64(s.next[0].NotAfter.Unix()))
	return ctrl.Result{}, nil
}

// checkServed says whether what was published is what is served: trustplane's own server
// answers from the same cache as it reads here, and, with nginx, every replica of the
// Deployment is updated and available. Not yet is Waiting: the watch on the ConfigMap and
// the Deployment brings the JWKSConfig back when that changes.
func (r *Reconciler) checkServed(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, r.served(ctx, s.cfg, s.doc)
}

func (r *Reconciler) served(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, doc []byte) error {
	name := jwkset.ConfigMapName(cfg)
	cm := &corev1.ConfigMap{}
	err := r.Owned.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: name}, cm)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("getting ConfigMap %s: %w", name, err)
	}
	serves, serr := r.Claims.Serves(ctx, cfg)
	if serr != nil {
		return serr
	}
	if err != nil || !serves || cm.Data[jwkset.DocumentKey] != string(doc) || cm.Labels[jwksv1alpha1.OwnerLabel] != cfg.Name {
		return status.Waiting(jwksv1alpha1.ReasonServerSyncing, "the set is written to ConfigMap %q; waiting for trustplane's server to answer it", name).KeepReady()
	}
	if !jwkset.NginxEnabled(cfg) {
		return nil
	}
	d := &appsv1.Deployment{}
	if err := r.Owned.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return status.Waiting(jwksv1alpha1.ReasonNginxUnavailable, "waiting for the nginx Deployment %q to appear", cfg.Name)
		}
		return fmt.Errorf("getting Deployment %s: %w", cfg.Name, err)
	}
	if !rolledOut(d) {
		hint, err := r.unscheduledHint(ctx, cfg)
		if err != nil {
			return err
		}
		return status.Waiting(jwksv1alpha1.ReasonNginxUnavailable, "nginx Deployment %q has %d of %d replicas updated and available%s",
			cfg.Name, min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), ptr.Deref(d.Spec.Replicas, 1), hint).KeepReady()
	}
	return nil
}

// unscheduledHint says why nginx pods do not run when no node takes them (no nodes, or
// none that fits, as under `make run`, which has no kubelet), and what to do instead;
// "" when some pod has a node.
func (r *Reconciler) unscheduledHint(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (string, error) {
	pods := &corev1.PodList{}
	if err := r.Owned.List(ctx, pods, client.InNamespace(cfg.Namespace), client.MatchingLabels(podLabels(cfg))); err != nil {
		return "", fmt.Errorf("listing nginx pods: %w", err)
	}
	why := "no pods exist yet (is kube-controller-manager running?)"
	if len(pods.Items) > 0 {
		why = fmt.Sprintf("no node has taken its %d pod(s)", len(pods.Items))
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != "" {
			return "", nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				why = fmt.Sprintf("no node can run its pods: %s", c.Message)
			}
		}
	}
	return "; " + why + ". Where no node can run nginx (a cluster without nodes, `make run`), set spec.nginx.enabled: false: trustplane's own server still serves the set", nil
}

// rolledOut is kubectl rollout status's test: the Deployment controller has seen the
// current spec, and every wanted replica runs it and is available.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want &&
		d.Status.AvailableReplicas >= want && d.Status.Replicas-d.Status.UpdatedReplicas <= 0
}

// setKeyStatus records the published keys in status, current first.
func setKeyStatus(cfg *jwksv1alpha1.JWKSConfig, keys []jwkset.PublishedKey) {
	cfg.Status.LastKeyID = keys[0].KeyID()
	cfg.Status.KeyCount = int32(len(keys)) //nolint:gosec // a set holds a handful of keys
	cfg.Status.Keys = make([]jwksv1alpha1.PublishedKey, 0, len(keys))
	for _, k := range keys {
		pk := jwksv1alpha1.PublishedKey{KeyID: k.KeyID(), Algorithm: k.JWK.Algorithm, PublicKey: jwkset.PublicJWK(k.Key)}
		if !k.NotAfter.IsZero() {
			pk.NotAfter = &metav1.Time{Time: k.NotAfter.UTC()}
		}
		if k.RetiredAt != nil {
			pk.RetiredAt = &metav1.Time{Time: k.RetiredAt.UTC()}
		}
		cfg.Status.Keys = append(cfg.Status.Keys, pk)
	}
}
