package jwks

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/status"
)

// parsedCert caches the last parse of a Secret's tls.crt, so an unchanged certificate
// (every resync) is not parsed again, nor read again while the Secret watch shows the
// Secret it was read from unchanged (secret).
type parsedCert struct {
	fingerprint [32]byte
	key         jwkset.Key
	secret      secretVersion
}

// secretVersion is which Secret, at which version, under which spec.algorithm, a key was
// parsed from.
type secretVersion struct {
	name, algorithm string
	uid             types.UID
	resourceVersion string
}

// readSecret reads the current key from certificateSecret's tls.crt, reusing the last
// parse when the bytes have not changed. While the Secret watch (metadata only) shows the
// Secret the last key was read from at the same resourceVersion, that key is taken without
// reading the Secret again: every change of the Secret brings the JWKSConfig back through
// that watch, and the reconcile it starts sees the new resourceVersion.
func (r *Reconciler) readSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	key, err := r.currentKey(ctx, s.cfg, s.now)
	s.key = key
	return ctrl.Result{}, err
}

func (r *Reconciler) currentKey(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, now time.Time) (jwkset.Key, error) {
	ref := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Spec.CertificateSecret}
	id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	watched, isWatched := r.watchedSecret(ctx, ref, cfg.Spec.Algorithm)
	if v, ok := r.parsed.Load(id); ok && isWatched && watched == v.(parsedCert).secret {
		return unexpired(v.(parsedCert).key, ref.Name, now)
	}
	secret := &corev1.Secret{}
	if err := r.getSecret(ctx, ref, watched.resourceVersion, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return jwkset.Key{}, status.Waiting(jwksv1alpha1.ReasonSecretNotFound, "Secret %q does not exist; waiting for it", ref.Name).Warn()
		}
		return jwkset.Key{}, fmt.Errorf("getting Secret %s: %w", ref.Name, err)
	}
	crt, ok := secret.Data[corev1.TLSCertKey]
	if !ok {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonMissingCertificate, Message: fmt.Sprintf("Secret %q has no %s", ref.Name, corev1.TLSCertKey)}
	}
	if len(crt) > jwkset.MaxCertificateBytes {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonCertificateTooLarge, Message: fmt.Sprintf("Secret %q: %s is %d bytes, more than the %d a certificate chain may have here", ref.Name, corev1.TLSCertKey, len(crt), jwkset.MaxCertificateBytes)}
	}
	version := secretVersion{name: ref.Name, algorithm: cfg.Spec.Algorithm, uid: secret.UID, resourceVersion: secret.ResourceVersion}
	fp := sha256.Sum256(append([]byte(cfg.Spec.Algorithm+"\x00"), crt...))
	if v, ok := r.parsed.Load(id); ok && v.(parsedCert).fingerprint == fp {
		r.parsed.Store(id, parsedCert{fingerprint: fp, key: v.(parsedCert).key, secret: version})
		return unexpired(v.(parsedCert).key, ref.Name, now)
	}
	key, err := jwkset.ParseChain(crt, cfg.Spec.Algorithm, now)
	if err != nil {
		var ie *jwkset.InputError
		if errors.As(err, &ie) {
			ie.Message = fmt.Sprintf("Secret %q: %s", ref.Name, ie.Message)
		}
		return jwkset.Key{}, err
	}
	r.parsed.Store(id, parsedCert{fingerprint: fp, key: key, secret: version})
	return key, nil
}

// getSecret reads Secret ref, as the API server has it at least at resourceVersion (the
// version the Secret watch shows; "": the newest). At a version the watch has shown, the
// API server answers from its own watch cache, without reading etcd: the reconciles of a
// burst of new JWKSConfigs, each reading its Secret, weigh on it as little as the watch
// does. What the watch shows later brings the JWKSConfig back (readSecret), as it does
// for a key read from the parse cache. If the API server cannot answer so, it is read
// as it is now.
func (r *Reconciler) getSecret(ctx context.Context, ref types.NamespacedName, resourceVersion string, secret *corev1.Secret) error {
	if resourceVersion != "" {
		err := r.APIReader.Get(ctx, ref, secret, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: resourceVersion}})
		if err == nil || apierrors.IsNotFound(err) {
			return err
		}
	}
	return r.APIReader.Get(ctx, ref, secret)
}

// unexpired is key, or CertificateExpired once its certificate has expired.
func unexpired(key jwkset.Key, secret string, now time.Time) (jwkset.Key, error) {
	if now.After(key.NotAfter) {
		return jwkset.Key{}, &jwkset.InputError{Reason: jwksv1alpha1.ReasonCertificateExpired, Message: fmt.Sprintf("the certificate in Secret %q expired at %s", secret, key.NotAfter.UTC().Format(time.RFC3339))}
	}
	return key, nil
}

// watchedSecret is the version of Secret ref the manager's Secret watch (metadata only:
// no key in memory) holds; false when it holds none or cannot say.
func (r *Reconciler) watchedSecret(ctx context.Context, ref types.NamespacedName, algorithm string) (secretVersion, bool) {
	if r.SecretMetadata == nil {
		return secretVersion{}, false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.SecretMetadata.Get(ctx, ref, obj); err != nil {
		return secretVersion{}, false
	}
	return secretVersion{name: ref.Name, algorithm: algorithm, uid: obj.UID, resourceVersion: obj.ResourceVersion}, true
}
