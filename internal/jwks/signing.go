package jwks

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
	"github.com/trustplane/trustplane/internal/status"
)

// Publish first, sign later (spec.signingSecret). Relying parties cache the set for
// cacheMaxAge and refetch only then (kube-apiserver among them), so a token signed with a
// key they have not fetched yet is refused. A new key of certificateSecret is published
// at once, and copied to the signing Secret — promoted — only once it has been served for
// cacheMaxAge plus a margin (kubelet's refresh of nginx's ConfigMap volume, clock skew)
// by every JWKS server: each server reports which keys waiting to sign it answers
// (status.pendingKeyID; jwkshttp, report.go), and the wait starts once every server whose
// report holds says it answers the key. A server's own word, because its watch may lag
// this controller's by far more than the margin (client-go backs a failing watch off for
// up to a minute after an API server restart) or be cut off while it still answers its
// last sets; a server that cannot report stops answering before its report runs out, and
// is then no longer waited for. The first key, and a key with updateStrategy immediate,
// is promoted as soon as every server answers it. Until then the key being signed with
// stays in the set (jwkset.Policy.Signing). The signing Secret itself records which key
// signs (its tls.crt's kid), so a restart or a leader change neither promotes early nor
// loses a promotion; status.pendingPromotionTime is set only once the new key is served
// everywhere, and recomputed later (never earlier) if it was lost.

// readSigning reads which key signs now (the kid in spec.signingSecret, "" without one),
// and decides which key the plan keeps for signers and whether the current key is
// promoted as soon as it is served (signingPolicy).
func (r *Reconciler) readSigning(ctx context.Context, s *scope) (ctrl.Result, error) {
	signing, err := r.signingState(ctx, s.cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.signing = signing
	s.keep, s.promoteAtOnce = signingPolicy(s.cfg, s.key.KeyID(), signing)
	if s.keep != "" && !slices.ContainsFunc(s.previous, func(k jwkset.PublishedKey) bool { return k.KeyID() == s.keep }) {
		// The key signers use is not in the set any more (only a lost ConfigMap and status
		// can do that): the current key, which is, signs from now on.
		s.keep, s.promoteAtOnce = "", true
	}
	return ctrl.Result{}, nil
}

// signingState is what signs now: the kid in the signing Secret, "" when there is none.
func (r *Reconciler) signingState(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (string, error) {
	if cfg.Spec.SigningSecret == "" {
		return "", nil
	}
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Spec.SigningSecret}
	if err := r.APIReader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("getting the signing Secret %s: %w", ref.Name, err)
	}
	if owner := secret.Labels[jwksv1alpha1.OwnerLabel]; owner != cfg.Name || secret.Type != corev1.SecretTypeTLS {
		whose := "was not made by trustplane"
		if owner != "" && owner != cfg.Name {
			whose = fmt.Sprintf("belongs to JWKSConfig %q", owner)
		} else if owner == cfg.Name {
			whose = fmt.Sprintf("is of type %s, not %s", secret.Type, corev1.SecretTypeTLS)
		}
		return "", status.Stalled(jwksv1alpha1.ReasonNameInUse,
			"Secret %q (spec.signingSecret) already exists and %s; it is left untouched: choose another name, delete it, or label it %s=%s to hand it over",
			ref.Name, whose, jwksv1alpha1.OwnerLabel, cfg.Name)
	}
	kid, err := jwkset.KeyIDOf(secret.Data[corev1.TLSCertKey])
	if err != nil {
		return "", nil // not a key anyone can sign with: as if there were none
	}
	return kid, nil
}

// signingPolicy is the kid Plan keeps as the signing key (jwkset.Policy.Signing), and
// whether the current key is promoted as soon as it is served: the first key, and any
// key with updateStrategy immediate (a compromised key must stop signing at once).
func signingPolicy(cfg *jwksv1alpha1.JWKSConfig, current, signing string) (keep string, promoteAtOnce bool) {
	switch {
	case cfg.Spec.SigningSecret == "" || signing == current:
		return "", false
	case signing == "" || cfg.Spec.UpdateStrategy == jwksv1alpha1.UpdateStrategyImmediate:
		return "", true
	}
	return signing, false
}

// promote runs once the set holding the current key is served (checkServed): it copies
// the current key to the signing Secret when it is due, and records the state in status.
// It asks to come back when a promotion is due, or when a server it waits for is no
// longer waited for.
func (r *Reconciler) promote(ctx context.Context, s *scope) (ctrl.Result, error) {
	published := publication{doc: s.doc, alg: publishedAlgorithm(s.next, s.key.KeyID())}
	wait, err := r.promoteKey(ctx, s.cfg, s.key.KeyID(), s.signing, s.promoteAtOnce, s.now, published)
	return ctrl.Result{RequeueAfter: wait}, err
}

// publication is the set published with the current key: its document and the key's alg
// (what relying parties are asked about, proof.go).
type publication struct {
	doc []byte
	alg string
}

// promoteKey is promote; it returns when to come back (0: nothing awaited).
func (r *Reconciler) promoteKey(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, current, signing string, atOnce bool, now time.Time, published publication) (time.Duration, error) {
	st := &cfg.Status
	if cfg.Spec.SigningSecret == "" {
		st.SigningKeyID, st.PendingKeyID, st.PendingPromotionTime = "", "", nil
		recordDocument(cfg, false, nil)
		return 0, nil
	}
	if signing == current { // the current key signs already
		st.SigningKeyID, st.PendingKeyID, st.PendingPromotionTime = current, "", nil
		recordDocument(cfg, false, nil)
		return 0, nil
	}
	st.SigningKeyID = signing
	if st.PendingKeyID != current {
		// The servers report the key once status names it (written at this reconcile's end).
		st.PendingKeyID, st.PendingPromotionTime = current, nil
		recordDocument(cfg, false, nil)
	}
	recordDocument(cfg, true, published.doc)
	if st.PendingPromotionTime == nil {
		if wait, err := r.awaitServers(ctx, cfg, current); err != nil || wait > 0 {
			return wait, err
		}
		if !atOnce {
			// From the moment the set is known served everywhere (checkServed has passed,
			// and every server says it answers it), rounded up to the second status keeps:
			// never early.
			at := promotionTime(r.Clock.Now(), jwkset.CacheMaxAge(cfg)+r.PromotionMargin)
			st.PendingPromotionTime = &metav1.Time{Time: at}
			r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonKeyPublished, "Publish",
				"Key %s is served by every JWKS server; signers get it in %s at %s, when caches of the set (max-age %v) have had time to see it",
				current, cfg.Spec.SigningSecret, at.UTC().Format(time.RFC3339), jwkset.CacheMaxAge(cfg))
		}
	}
	early := time.Duration(0)
	if !atOnce {
		if wait := st.PendingPromotionTime.Sub(now); wait > 0 {
			// Before the timer, only on the relying parties' word (proof.go).
			if cfg.Spec.Promotion == nil {
				return wait, nil
			}
			if !r.proven(ctx, cfg, current, published.alg) {
				return min(wait, r.ScrapeInterval), nil
			}
			early = wait
		}
	}
	if err := r.writeSigningSecret(ctx, cfg, current); err != nil {
		return 0, err
	}
	if early > 0 {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonKeyPromoted, "Promote",
			"Key %s is in %s: signers use it now (was %s); every relying party reports a fetched set holding it, %v before its timer",
			current, cfg.Spec.SigningSecret, orNone(signing), early.Round(time.Second))
	} else {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeNormal, jwksv1alpha1.ReasonKeyPromoted, "Promote",
			"Key %s is in %s: signers use it now (was %s)", current, cfg.Spec.SigningSecret, orNone(signing))
	}
	recordDocument(cfg, false, nil)
	st.SigningKeyID, st.PendingKeyID, st.PendingPromotionTime = current, "", nil
	// Come back at once: the key that signed until now is retired from this moment.
	return time.Millisecond, nil
}

// awaitServers says how long to wait, at most, before every JWKS server whose report
// holds answers kid for cfg: 0 once they all do (or none reports). The watch on the
// servers' Leases brings cfg back when a report changes; the wait ends when the first
// report waited for runs out, as that server no longer answers then.
func (r *Reconciler) awaitServers(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, kid string) (time.Duration, error) {
	if r.Servers == nil {
		return 0, nil
	}
	leases := &coordinationv1.LeaseList{}
	if err := r.Servers.List(ctx, leases, client.InNamespace(r.ServerNamespace)); err != nil {
		return 0, fmt.Errorf("listing the JWKS servers' reports: %w", err)
	}
	reports := make([]jwkshttp.ServerReport, 0, len(leases.Items))
	for i := range leases.Items {
		reports = append(reports, jwkshttp.ReportOf(&leases.Items[i]))
	}
	waiting, wait := awaiting(reports, cfg.Namespace+"/"+cfg.Name, kid, r.Clock.Now())
	if len(waiting) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("key waits for JWKS servers to answer it", "kid", kid, "servers", waiting, "atMost", wait)
	}
	return wait, nil
}

// awaiting are the servers (their holders) whose report holds at now and does not say
// they answer kid for the JWKSConfig id ("<namespace>/<name>"), and how long until the
// first of those reports runs out. A server whose report ran out is not waited for: it
// stopped answering before (jwkshttp, report.go).
func awaiting(reports []jwkshttp.ServerReport, id, kid string, now time.Time) (waiting []string, wait time.Duration) {
	for _, rep := range reports {
		if !rep.Until.After(now) || rep.Serving[id].KeyID == kid {
			continue
		}
		waiting = append(waiting, rep.Holder)
		if w := rep.Until.Sub(now); wait == 0 || w < wait {
			wait = w
		}
	}
	return waiting, wait
}

// writeSigningSecret copies certificateSecret's key, which must still be kid, to the
// signing Secret. The source is read again: a key replaced meanwhile is never promoted.
func (r *Reconciler) writeSigningSecret(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, kid string) error {
	source := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Spec.CertificateSecret}, source); err != nil {
		return fmt.Errorf("getting Secret %s to promote its key: %w", cfg.Spec.CertificateSecret, err)
	}
	if got, err := jwkset.KeyIDOf(source.Data[corev1.TLSCertKey]); err != nil || got != kid {
		// Replaced since this reconcile read it: the retry publishes the new key first.
		return fmt.Errorf("the certificate Secret %s no longer holds key %s", cfg.Spec.CertificateSecret, kid)
	}
	if len(source.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return status.Stalled(jwksv1alpha1.ReasonMissingPrivateKey, "Secret %q has no %s: spec.signingSecret gets no key to sign with", cfg.Spec.CertificateSecret, corev1.TLSPrivateKeyKey)
	}
	data := map[string][]byte{corev1.TLSCertKey: source.Data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: source.Data[corev1.TLSPrivateKeyKey]}
	if ca := source.Data["ca.crt"]; len(ca) > 0 {
		data["ca.crt"] = ca
	}
	return r.apply(ctx, &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Spec.SigningSecret, Labels: labelsFor(cfg)},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	})
}

// promotionTime is servedAt + wait, rounded up to the whole second: status stores times to
// the second, and a time read back rounded down would promote up to a second early.
func promotionTime(servedAt time.Time, wait time.Duration) time.Time {
	at := servedAt.Add(wait)
	if t := at.Truncate(time.Second); !t.Equal(at) {
		return t.Add(time.Second)
	}
	return at
}

func orNone(kid string) string {
	if kid == "" {
		return "none"
	}
	return kid
}
