// Package issuerclaim records which JWKSConfig serves an issuer. An issuer (host and
// path, jwkset.IssuerKey) belongs to one JWKSConfig; which one is recorded in a claim: a
// ConfigMap in the manager's namespace, where tenants cannot write, so neither a forged
// status nor the age of an object decides who serves an issuer. The first JWKSConfig to
// claim an issuer keeps it until it lets it go (deleted, or its issuer changed); then the
// issuer stays with its namespace for the hold time (--jwks-max-cache-max-age: relying
// parties may still cache the last set served under it), so a JWKSConfig recreated in the
// same namespace gets it back and another namespace's JWKSConfig waits. The operator can
// bind issuer hosts or path prefixes to one namespace (--jwks-issuer-namespaces), and hand
// an issuer over at once by deleting its claim.
//
// The controller claims and releases (Claims.Claim, Claims.Release, with its client and
// clock); the JWKS server only asks (Claims.Serves).
package issuerclaim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// namePrefix starts the name of every claim ConfigMap.
const namePrefix = "jwks-issuer-"

// claim data keys.
const (
	dataIssuer     = "issuer"
	dataNamespace  = "namespace"
	dataName       = "jwksconfig"
	dataUID        = "uid"
	dataReleasedAt = "releasedAt"
)

// KeyIndex indexes JWKSConfigs by jwkset.IssuerKeyOf, so that a claim's change finds the
// JWKSConfigs naming its issuer (KeyIndexOf is its value).
const KeyIndex = ".spec.issuer.key"

// KeyIndexOf is the KeyIndex value of a JWKSConfig.
func KeyIndexOf(o client.Object) []string {
	if key := jwkset.IssuerKeyOf(o.(*jwksv1alpha1.JWKSConfig)); key != "" {
		return []string{key}
	}
	return nil
}

// Claims reads and writes issuer claims.
type Claims struct {
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

// ObjectName is the name of the claim ConfigMap of an issuer key.
func ObjectName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return namePrefix + hex.EncodeToString(sum[:10])
}

// IssuerOf is the issuer key a claim ConfigMap records, "" when it is not a claim.
func IssuerOf(cm *corev1.ConfigMap) string { return cm.Data[dataIssuer] }

// HolderOf is the JWKSConfig a claim ConfigMap names: its holder, or its last holder once
// released.
func HolderOf(cm *corev1.ConfigMap) types.NamespacedName {
	return types.NamespacedName{Namespace: cm.Data[dataNamespace], Name: cm.Data[dataName]}
}

// Refusal says why cfg's namespace may not serve the issuer key, "" when it may. Three
// things are never a tenant's to claim, whoever asks first:
//   - a host the operator declares as the JWKS server's own (--jwks-server-hosts): the
//     server answers those hosts by path alone, for proxies that rewrite Host;
//   - a path /<namespace>/<name> of another namespace: the canonical route of that
//     namespace's JWKSConfig, which the server answers on every host;
//   - an issuer the operator binds to another namespace (--jwks-issuer-namespaces).
func (c *Claims) Refusal(cfg *jwksv1alpha1.JWKSConfig, key string) string {
	host, path := jwkset.SplitIssuerKey(key)
	if slices.Contains(c.ServerHosts, host) {
		return fmt.Sprintf("%s is a host name of trustplane's JWKS server (--jwks-server-hosts), which answers it by path alone; no JWKSConfig may claim an issuer on it", host)
	}
	if ns, name, ok := jwkset.CanonicalRoute(path); ok && ns != cfg.Namespace {
		return fmt.Sprintf("the path %s is the canonical route of JWKSConfig %q in namespace %q (/<namespace>/<name>/jwks.json), served on every host; no issuer of namespace %q may name it",
			path, name, ns, cfg.Namespace)
	}
	if ns, bound := c.Bindings.NamespaceFor(key); bound && ns != cfg.Namespace {
		return fmt.Sprintf("the operator binds issuer %s to namespace %q (--jwks-issuer-namespaces); it is not served from namespace %q", key, ns, cfg.Namespace)
	}
	return ""
}

// get reads the claim of an issuer key; nil when there is none.
func (c *Claims) get(ctx context.Context, key string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ObjectName(key)}, cm)
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
func (c *Claims) Serves(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (bool, error) {
	if cfg.Spec.Issuer == "" {
		return true, nil
	}
	key := jwkset.IssuerKeyOf(cfg)
	if key == "" || c.Refusal(cfg, key) != "" {
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
	return cm.Data[dataUID] == string(cfg.UID) && cm.Data[dataReleasedAt] == ""
}

// Desired is the claim of key by cfg.
func (c *Claims) Desired(cfg *jwksv1alpha1.JWKSConfig, key string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: ObjectName(key),
			Labels: map[string]string{jwksv1alpha1.IssuerClaimLabel: string(cfg.UID), "app.kubernetes.io/managed-by": "trustplane"}},
		Data: map[string]string{dataIssuer: key, dataNamespace: cfg.Namespace, dataName: cfg.Name, dataUID: string(cfg.UID)},
	}
}
