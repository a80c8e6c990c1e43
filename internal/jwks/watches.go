package jwks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// The indexes and event mappers of the controller's watches (wired in setup.go): each
// maps an event of a watched object to the JWKSConfigs it concerns.

// Indexes of JWKSConfigs in the manager's cache.
const (
	// secretIndex indexes JWKSConfigs by the Secrets they read and write (certificateSecret,
	// signingSecret), so a Secret event finds its JWKSConfigs without listing them all.
	secretIndex = ".spec.certificateSecret"
	// objectNameIndex indexes JWKSConfigs by the names of the objects they write, so that
	// when one JWKSConfig frees a name (deleted, renamed), another that stalled on it
	// (NameInUse) is reconciled at once.
	objectNameIndex = ".spec.objectNames"
)

// ownerIndex indexes the ConfigMaps of the controller's private cache (Owned) by the
// JWKSConfig that made them (OwnerLabel's value), so that finding one JWKSConfig's
// ConfigMaps, on every reconcile, does not scan all of its namespace's: a label selector
// alone is matched against each cached object of the namespace.
const ownerIndex = ".metadata.labels.owner"

// ownerIndexOf is the ownerIndex value of an object.
func ownerIndexOf(o client.Object) []string {
	if owner, ok := o.GetLabels()[jwksv1alpha1.OwnerLabel]; ok {
		return []string{owner}
	}
	return nil
}

// secretIndexOf is the secretIndex value of a JWKSConfig.
func secretIndexOf(o client.Object) []string {
	c := o.(*jwksv1alpha1.JWKSConfig)
	if c.Spec.SigningSecret != "" { // its loss or an edit brings the JWKSConfig back too
		return []string{c.Spec.CertificateSecret, c.Spec.SigningSecret}
	}
	return []string{c.Spec.CertificateSecret}
}

// objectNameIndexOf is the objectNameIndex value of a JWKSConfig: its ConfigMaps' names.
func objectNameIndexOf(o client.Object) []string {
	c := o.(*jwksv1alpha1.JWKSConfig)
	return []string{jwkset.ConfigMapName(c), jwkset.NginxConfigMapName(c)}
}

// configOfOwned maps an event of an object the controller made (a Deployment, a Service)
// to the JWKSConfig its OwnerLabel names.
func configOfOwned(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[jwksv1alpha1.OwnerLabel]}}}
}

// configsForSecret maps a Secret event to the JWKSConfigs that read it.
func (r *Reconciler) configsForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := r.Client.List(ctx, list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{secretIndex: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing JWKSConfigs for a Secret", "secret", secret.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	return reqs
}

// configsForConfigMap maps an event of a ConfigMap made for a JWKSConfig to that
// JWKSConfig and to every other one in the namespace that names the ConfigMap (and waits,
// NameInUse, for the name to be freed).
func (r *Reconciler) configsForConfigMap(ctx context.Context, cm client.Object) []reconcile.Request {
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: cm.GetNamespace(), Name: cm.GetLabels()[jwksv1alpha1.OwnerLabel]}}}
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cm.GetNamespace()), client.MatchingFields{objectNameIndex: cm.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing JWKSConfigs for a ConfigMap", "configMap", cm.GetName())
		return reqs
	}
	for _, c := range list.Items {
		if c.Name != reqs[0].Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return reqs
}

// configsForClaim maps a claim's event to the JWKSConfigs naming its issuer.
func (r *Reconciler) configsForClaim(ctx context.Context, cm client.Object) []reconcile.Request {
	key := issuerclaim.IssuerOf(cm.(*corev1.ConfigMap))
	if key == "" {
		return nil
	}
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{issuerclaim.KeyIndex: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing JWKSConfigs for an issuer claim", "issuer", key)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	return reqs
}
