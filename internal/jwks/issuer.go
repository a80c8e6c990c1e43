package jwks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// An issuer (host and path, jwkset.IssuerKey) belongs to one JWKSConfig. Which one is
// recorded in a claim: a ConfigMap in the manager's namespace, where tenants cannot
// write, so neither a forged status nor the age of an object decides who serves an
// issuer. The first JWKSConfig to claim an issuer keeps it until it lets it go (deleted,
// or its issuer changed); then the issuer stays with its namespace for the hold time
// (--jwks-max-cache-max-age: relying parties may still cache the last set served under
// it), so a JWKSConfig recreated in the same namespace gets it back and another
// namespace's JWKSConfig waits. The operator can bind issuer hosts or path prefixes to
// one namespace (--jwks-issuer-namespaces), and hand an issuer over at once by deleting
// its claim.
const (
	// IssuerClaimLabel marks issuer claims; its value is the claim holder's UID.
	IssuerClaimLabel = "jwks.trustplane.io/issuer-claim"
	// claimPrefix starts the name of every claim ConfigMap.
	claimPrefix = "jwks-issuer-"
)

// claim data keys.
const (
	claimIssuer     = "issuer"
	claimNamespace  = "namespace"
	claimName       = "jwksconfig"
	claimUID        = "uid"
	claimReleasedAt = "releasedAt"
)

// IssuerClaims reads and writes issuer claims.
type IssuerClaims struct {
	// Namespace holds the claims (--jwks-issuer-claim-namespace).
	Namespace string
	// Reader reads claims from a cache of that namespace's claims.
	Reader client.Reader
	// Bindings are the operator's issuer → namespace bindings.
	Bindings jwkset.IssuerBindings
	// ServerHosts are the JWKS server's own host names (jwkset.HostKey), which no issuer
	// may name (--jwks-server-hosts).
	ServerHosts []string
	// Hold is how long a released issuer stays with its namespace.
	Hold time.Duration
}

// issuerKeyOf is the issuer key of a JWKSConfig, "" without an issuer (or with one that
// does not parse, which admission refuses).
func issuerKeyOf(cfg *jwksv1alpha1.JWKSConfig) string {
	if cfg.Spec.Issuer == "" {
		return ""
	}
	key, err := jwkset.IssuerKey(cfg.Spec.Issuer)
	if err != nil {
		return ""
	}
	return key
}

func claimObjectName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return claimPrefix + hex.EncodeToString(sum[:10])
}

// refusal says why cfg's namespace may not serve the issuer key, "" when it may. Three
// things are never a tenant's to claim, whoever asks first:
//   - a host the operator declares as the JWKS server's own (--jwks-server-hosts): the
//     server answers those hosts by path alone, for proxies that rewrite Host;
//   - a path /<namespace>/<name> of another namespace: the canonical route of that
//     namespace's JWKSConfig, which the server answers on every host;
//   - an issuer the operator binds to another namespace (--jwks-issuer-namespaces).
func (c *IssuerClaims) refusal(cfg *jwksv1alpha1.JWKSConfig, key string) string {
	host, path := splitIssuerKey(key)
	if slices.Contains(c.ServerHosts, host) {
		return fmt.Sprintf("%s is a host name of trustplane's JWKS server (--jwks-server-hosts), which answers it by path alone; no JWKSConfig may claim an issuer on it", host)
	}
	if ns, name, ok := canonicalRoute(path); ok && ns != cfg.Namespace {
		return fmt.Sprintf("the path %s is the canonical route of JWKSConfig %q in namespace %q (/<namespace>/<name>/jwks.json), served on every host; no issuer of namespace %q may name it",
			path, name, ns, cfg.Namespace)
	}
	if ns, bound := c.Bindings.NamespaceFor(key); bound && ns != cfg.Namespace {
		return fmt.Sprintf("the operator binds issuer %s to namespace %q (--jwks-issuer-namespaces); it is not served from namespace %q", key, ns, cfg.Namespace)
	}
	return ""
}

// splitIssuerKey splits an issuer key into its host and its path ("" at the root).
func splitIssuerKey(key string) (host, path string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i:]
	}
	return key, ""
}

// canonicalRoute reads a path of exactly two segments, /<namespace>/<name>: the route of
// a JWKSConfig (/<namespace>/<name>/jwks.json) that the server answers on every host.
func canonicalRoute(path string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return namespace, name, ok && strings.HasPrefix(path, "/") && namespace != "" && name != "" && !strings.Contains(name, "/")
}

// get reads the claim of an issuer key; nil when there is none.
func (c *IssuerClaims) get(ctx context.Context, key string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: claimObjectName(key)}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the claim of issuer %s: %w", key, err)
	}
	return cm, nil
}

// Serves says whether cfg may be served: it has no issuer, or it holds its issuer's claim
// and the operator's bindings allow it. The server asks this on every request.
func (c *IssuerClaims) Serves(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (bool, error) {
	if cfg.Spec.Issuer == "" {
		return true, nil
	}
	key := issuerKeyOf(cfg)
	if key == "" || c.refusal(cfg, key) != "" {
		return false, nil
	}
	cm, err := c.get(ctx, key)
	if err != nil || cm == nil {
		return false, err
	}
	return heldBy(cm, cfg), nil
}

// heldBy says whether the claim is cfg's and not released.
func heldBy(cm *corev1.ConfigMap, cfg *jwksv1alpha1.JWKSConfig) bool {
	return cm.Data[claimUID] == string(cfg.UID) && cm.Data[claimReleasedAt] == ""
}

// desiredClaim is the claim of key by cfg.
func (c *IssuerClaims) desiredClaim(cfg *jwksv1alpha1.JWKSConfig, key string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: claimObjectName(key),
			Labels: map[string]string{IssuerClaimLabel: string(cfg.UID), "app.kubernetes.io/managed-by": "trustplane"}},
		Data: map[string]string{claimIssuer: key, claimNamespace: cfg.Namespace, claimName: cfg.Name, claimUID: string(cfg.UID)},
	}
}

// claimIssuer makes cfg the holder of its issuer, letting go of any other issuer it
// held; an issuer that is not free is IssuerInUse (waiting for the hold time to end, or
// stalled while another JWKSConfig serves it) or IssuerNotAllowed (bound elsewhere).
func (r *Reconciler) claimIssuer(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) error {
	key := issuerKeyOf(cfg)
	if err := r.releaseIssuers(ctx, cfg, key, now); err != nil {
		return err
	}
	if key == "" {
		return nil
	}
	if why := r.Claims.refusal(cfg, key); why != "" {
		return status.Stalled(jwksv1alpha1.ReasonIssuerNotAllowed, "%s", why)
	}
	cm, err := r.Claims.get(ctx, key)
	if err != nil {
		return err
	}
	if cm == nil {
		if err := r.Client.Create(ctx, r.Claims.desiredClaim(cfg, key)); err != nil {
			// AlreadyExists: another JWKSConfig claimed it first; the retry reads who.
			return status.WriteFailed("create", r.Claims.desiredClaim(cfg, key), err)
		}
		return nil
	}
	if heldBy(cm, cfg) {
		return nil
	}
	if err := r.claimFree(ctx, cfg, cm, now); err != nil {
		return err
	}
	taken := r.Claims.desiredClaim(cfg, key)
	taken.ResourceVersion = cm.ResourceVersion // taken over only from what was read
	if err := r.Client.Update(ctx, taken); err != nil {
		return status.WriteFailed("update", taken, err)
	}
	return nil
}

// claimFree returns nil when cfg may take the claim over: it was released by cfg's own
// namespace, or released by another namespace longer than the hold time ago. A holder
// that vanished without letting go (its finalizer removed by hand, its issuer changed
// while the manager was down) is released now, and the hold starts now.
func (r *Reconciler) claimFree(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap, now time.Time) error {
	key := cm.Data[claimIssuer]
	if cm.Data[claimReleasedAt] == "" {
		alive, err := r.holderAlive(ctx, cm)
		if err != nil {
			return err
		}
		if alive {
			return r.inUse(cfg, cm)
		}
		if err := r.release(ctx, cm, now); err != nil {
			return err
		}
	}
	if cm.Data[claimNamespace] == cfg.Namespace {
		return nil
	}
	releasedAt, err := time.Parse(time.RFC3339, cm.Data[claimReleasedAt])
	if err != nil { // not ours to repair: treat it as released now
		releasedAt = now
	}
	if wait := releasedAt.Add(r.Claims.Hold).Sub(now); wait > 0 {
		return status.Waiting(jwksv1alpha1.ReasonIssuerInUse,
			"issuer %s was served from another namespace until %s; it stays with that namespace until %s (relying parties may still cache its set)",
			key, releasedAt.UTC().Format(time.RFC3339), releasedAt.Add(r.Claims.Hold).UTC().Format(time.RFC3339)).After(wait)
	}
	return nil
}

// inUse is the error of an issuer another live JWKSConfig holds. Another namespace's
// JWKSConfig is not named: that is another tenant's business.
func (r *Reconciler) inUse(cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap) error {
	holder := "a JWKSConfig in another namespace"
	if cm.Data[claimNamespace] == cfg.Namespace {
		holder = fmt.Sprintf("JWKSConfig %q", cm.Data[claimName])
	}
	return status.Stalled(jwksv1alpha1.ReasonIssuerInUse,
		"issuer %s is served by %s; it is never served by two, whichever is older. The operator can bind issuers to namespaces (--jwks-issuer-namespaces)",
		cm.Data[claimIssuer], holder)
}

// holderAlive says whether the claim's holder still exists and still names the issuer.
func (r *Reconciler) holderAlive(ctx context.Context, cm *corev1.ConfigMap) (bool, error) {
	holder := &jwksv1alpha1.JWKSConfig{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: cm.Data[claimNamespace], Name: cm.Data[claimName]}, holder)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the holder of issuer %s: %w", cm.Data[claimIssuer], err)
	}
	return string(holder.UID) == cm.Data[claimUID] && holder.DeletionTimestamp.IsZero() && issuerKeyOf(holder) == cm.Data[claimIssuer], nil
}

// releaseIssuers lets go of every issuer cfg holds but keep.
func (r *Reconciler) releaseIssuers(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, keep string, now time.Time) error {
	held := &corev1.ConfigMapList{}
	if err := r.Claims.Reader.List(ctx, held, client.InNamespace(r.Claims.Namespace), client.MatchingLabels{IssuerClaimLabel: string(cfg.UID)}); err != nil {
		return fmt.Errorf("listing the issuer claims of the JWKSConfig: %w", err)
	}
	for i := range held.Items {
		if cm := &held.Items[i]; cm.Data[claimIssuer] != keep && cm.Data[claimReleasedAt] == "" {
			if err := r.release(ctx, cm, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// release marks a claim released at now (cm is updated in place).
func (r *Reconciler) release(ctx context.Context, cm *corev1.ConfigMap, now time.Time) error {
	cm.Data[claimReleasedAt] = now.UTC().Format(time.RFC3339)
	if err := r.Client.Update(ctx, cm); err != nil {
		return status.WriteFailed("update", cm, err)
	}
	return nil
}
