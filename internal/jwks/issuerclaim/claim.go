package issuerclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// Claim makes cfg the holder of its issuer, letting go of any other issuer it held, with
// w (which writes claims and reads JWKSConfigs) at now. An issuer that is not free is
// IssuerInUse (waiting for the hold time to end, or stalled while another JWKSConfig
// serves it) or IssuerNotAllowed (bound elsewhere).
func (c *Claims) Claim(ctx context.Context, w client.Client, cfg *jwksv1alpha1.JWKSConfig, now time.Time) error {
	key := jwkset.IssuerKeyOf(cfg)
	if err := c.Release(ctx, w, cfg, key, now); err != nil {
		return err
	}
	if key == "" {
		return nil
	}
	if why := c.Refusal(cfg, key); why != "" {
		return status.Stalled(jwksv1alpha1.ReasonIssuerNotAllowed, "%s", why)
	}
	cm, err := c.get(ctx, key)
	if err != nil {
		return err
	}
	if cm == nil {
		if err := w.Create(ctx, c.Desired(cfg, key)); err != nil {
			// AlreadyExists: another JWKSConfig claimed it first; the retry reads who.
			return status.WriteFailed("create", c.Desired(cfg, key), err)
		}
		return nil
	}
	if heldBy(cm, cfg) {
		return nil
	}
	if err := c.free(ctx, w, cfg, cm, now); err != nil {
		return err
	}
	taken := c.Desired(cfg, key)
	taken.ResourceVersion = cm.ResourceVersion // taken over only from what was read
	if err := w.Update(ctx, taken); err != nil {
		return status.WriteFailed("update", taken, err)
	}
	return nil
}

// free returns nil when cfg may take the claim over: it was released by cfg's own
// namespace, or released by another namespace longer than the hold time ago. A holder
// that vanished without letting go (its finalizer removed by hand, its issuer changed
// while the manager was down) is released now, and the hold starts now.
func (c *Claims) free(ctx context.Context, w client.Client, cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap, now time.Time) error {
	key := cm.Data[dataIssuer]
	if cm.Data[dataReleasedAt] == "" {
		alive, err := holderAlive(ctx, w, cm)
		if err != nil {
			return err
		}
		if alive {
			return inUse(cfg, cm)
		}
		if err := release(ctx, w, cm, now); err != nil {
			return err
		}
	}
	if cm.Data[dataNamespace] == cfg.Namespace {
		return nil
	}
	releasedAt, err := time.Parse(time.RFC3339, cm.Data[dataReleasedAt])
	if err != nil { // not ours to repair: treat it as released now
		releasedAt = now
	}
	if wait := releasedAt.Add(c.Hold).Sub(now); wait > 0 {
		return status.Waiting(jwksv1alpha1.ReasonIssuerInUse,
			"issuer %s was served from another namespace until %s; it stays with that namespace until %s (relying parties may still cache its set)",
			key, releasedAt.UTC().Format(time.RFC3339), releasedAt.Add(c.Hold).UTC().Format(time.RFC3339)).After(wait)
	}
	return nil
}

// inUse is the error of an issuer another live JWKSConfig holds. Another namespace's
// JWKSConfig is not named: that is another tenant's business.
func inUse(cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap) error {
	holder := "a JWKSConfig in another namespace"
	if cm.Data[dataNamespace] == cfg.Namespace {
		holder = fmt.Sprintf("JWKSConfig %q", cm.Data[dataName])
	}
	return status.Stalled(jwksv1alpha1.ReasonIssuerInUse,
		"issuer %s is served by %s; it is never served by two, whichever is older. The operator can bind issuers to namespaces (--jwks-issuer-namespaces)",
		cm.Data[dataIssuer], holder)
}

// holderAlive says whether the claim's holder still exists and still names the issuer.
func holderAlive(ctx context.Context, r client.Reader, cm *corev1.ConfigMap) (bool, error) {
	holder := &jwksv1alpha1.JWKSConfig{}
	err := r.Get(ctx, HolderOf(cm), holder)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the holder of issuer %s: %w", cm.Data[dataIssuer], err)
	}
	return string(holder.UID) == cm.Data[dataUID] && holder.DeletionTimestamp.IsZero() && jwkset.IssuerKeyOf(holder) == cm.Data[dataIssuer], nil
}

// Release lets go of every issuer cfg holds but keep ("": all of them), with w at now.
func (c *Claims) Release(ctx context.Context, w client.Writer, cfg *jwksv1alpha1.JWKSConfig, keep string, now time.Time) error {
	held := &corev1.ConfigMapList{}
	if err := c.Reader.List(ctx, held, client.InNamespace(c.Namespace), client.MatchingLabels{jwksv1alpha1.IssuerClaimLabel: string(cfg.UID)}); err != nil {
		return fmt.Errorf("listing the issuer claims of the JWKSConfig: %w", err)
	}
	for i := range held.Items {
		if cm := &held.Items[i]; cm.Data[dataIssuer] != keep && cm.Data[dataReleasedAt] == "" {
			if err := release(ctx, w, cm, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// release marks a claim released at now (cm is updated in place).
func release(ctx context.Context, w client.Writer, cm *corev1.ConfigMap, now time.Time) error {
	cm.Data[dataReleasedAt] = now.UTC().Format(time.RFC3339)
	if err := w.Update(ctx, cm); err != nil {
		return status.WriteFailed("update", cm, err)
	}
	return nil
}
