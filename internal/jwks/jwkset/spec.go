package jwkset

import (
	"time"

	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// What a JWKSConfig's spec means, for the controller and the JWKS server alike. These
// accessors apply the API defaults also to objects stored before a default existed.

// Defaults of the spec (the CRD's too).
const (
	// DefaultCacheMaxAge is spec.cacheMaxAge's default.
	DefaultCacheMaxAge = 5 * time.Minute
	// DefaultOldKeysTTL is spec.oldKeysTTL's default.
	DefaultOldKeysTTL = 720 * time.Hour
	// DefaultMaxKeys is spec.maxKeys's default.
	DefaultMaxKeys = 3
)

// ConfigMapName is the name of the ConfigMap that holds the JWKSConfig's set
// (spec.configMapName, default <name>-jwks).
func ConfigMapName(c *jwksv1alpha1.JWKSConfig) string {
	if c.Spec.ConfigMapName != "" {
		return c.Spec.ConfigMapName
	}
	return c.Name + "-jwks"
}

// NginxConfigMapName is the name of the ConfigMap that holds nginx's configuration
// (spec.nginxConfigMapName, default <name>-nginx).
func NginxConfigMapName(c *jwksv1alpha1.JWKSConfig) string {
	if c.Spec.NginxConfigMapName != "" {
		return c.Spec.NginxConfigMapName
	}
	return c.Name + "-nginx"
}

// NginxEnabled says whether the JWKSConfig runs nginx (spec.nginx.enabled, default true).
func NginxEnabled(c *jwksv1alpha1.JWKSConfig) bool { return ptr.Deref(c.Spec.Nginx.Enabled, true) }

// CacheMaxAge is how long relying parties may cache the set (spec.cacheMaxAge).
func CacheMaxAge(c *jwksv1alpha1.JWKSConfig) time.Duration {
	return durationOr(c.Spec.CacheMaxAge, DefaultCacheMaxAge)
}

// PolicyOf is the rotation policy the spec asks for (without Signing, which the signing
// Secret decides).
func PolicyOf(c *jwksv1alpha1.JWKSConfig) Policy {
	return Policy{
		KeepOldKeys: c.Spec.UpdateStrategy != jwksv1alpha1.UpdateStrategyImmediate && ptr.Deref(c.Spec.KeepOldKeys, true),
		OldKeysTTL:  durationOr(c.Spec.OldKeysTTL, DefaultOldKeysTTL),
		MaxKeys:     int(ptr.Deref(c.Spec.MaxKeys, DefaultMaxKeys)),
	}
}

// IssuerKeyOf is the issuer key of a JWKSConfig, "" without an issuer (or with one that
// does not parse, which admission refuses).
func IssuerKeyOf(c *jwksv1alpha1.JWKSConfig) string {
	if c.Spec.Issuer == "" {
		return ""
	}
	key, err := IssuerKey(c.Spec.Issuer)
	if err != nil {
		return ""
	}
	return key
}

// durationOr is d, or def when d is unset (or invalid: the controller reports that,
// InvalidSpec).
func durationOr(d *jwksv1alpha1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	if v, err := d.Parse(); err == nil {
		return v
	}
	return def
}
