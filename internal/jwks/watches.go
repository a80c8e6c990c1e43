package jwks

import (
	"context"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
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
	// awaitingIndex indexes JWKSConfigs whose key waits for the JWKS servers' reports
	// (status.pendingKeyID without a promotion time yet), so that a server that stops
	// brings them back at once.
	awaitingIndex = ".status.awaitingServers"
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

// awaitingIndexOf is the awaitingIndex value of a JWKSConfig: "true" while its pending key
// waits for the servers.
func awaitingIndexOf(o client.Object) []string {
	if st := o.(*jwksv1alpha1.JWKSConfig).Status; st.PendingKeyID != "" && st.PendingPromotionTime == nil {
		return []string{"true"}
	}
	return nil
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

// serverReports maps the events of the JWKS servers' Leases (jwkshttp, report.go) to the
// JWKSConfigs whose promotion they may let go on: those a report names, before or after
// a change of it, and, when a server stops (deletes its Lease), every JWKSConfig whose
// key waits for the servers. A renewal that changes no report maps to nothing; a report
// that runs out brings nothing back, the waiting JWKSConfig asks to come back then.
func (r *Reconciler) serverReports() handler.EventHandler {
	named := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], leases ...client.Object) {
		for _, l := range leases {
			lease, ok := l.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			for id := range jwkshttp.ReportOf(lease).Serving {
				if ns, name, ok := strings.Cut(id, "/"); ok {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			named(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetAnnotations()[jwksv1alpha1.ServingAnnotation] != e.ObjectNew.GetAnnotations()[jwksv1alpha1.ServingAnnotation] {
				named(q, e.ObjectOld, e.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			list := &jwksv1alpha1.JWKSConfigList{}
			if err := r.Client.List(ctx, list, client.MatchingFields{awaitingIndex: "true"}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing JWKSConfigs whose key waits for the JWKS servers")
				return
			}
			for _, c := range list.Items {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
			}
		},
	}
}
