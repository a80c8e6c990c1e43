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

// secretEvents maps the events of the Secrets (metadata only) to the JWKSConfigs that
// read them: a created or changed Secret to those that have not read this version of it
// yet (configsForSecret), a deleted one to all (configsReading).
func (r *Reconciler) secretEvents() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.configsForSecret(ctx, e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.configsForSecret(ctx, e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.configsReading(ctx, e.Object, false))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.configsReading(ctx, e.Object, false))
		},
	}
}

// configsForSecret maps the event of a created or changed Secret to the JWKSConfigs that
// read it, but those whose current key was read from this very version of it
// (certificateSecret: same UID and resourceVersion, under the same spec.algorithm): the
// reconcile that read it has acted on all the event tells, and another would find
// nothing to do. That is the Secret created just before its JWKSConfig, whose event comes
// after the JWKSConfig's first reconcile has read it.
func (r *Reconciler) configsForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	return r.configsReading(ctx, secret, true)
}

// configsReading maps a Secret to the JWKSConfigs that read it (secretIndex); with
// unreadOnly, only those that have not read this version of it yet.
func (r *Reconciler) configsReading(ctx context.Context, secret client.Object, unreadOnly bool) []reconcile.Request {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := r.Client.List(ctx, list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{secretIndex: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing JWKSConfigs for a Secret", "secret", secret.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		id := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
		if unreadOnly && r.hasRead(id, c, secret) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: id})
	}
	return reqs
}

// hasRead says whether c's current key was read from secret at its version (readSecret).
// Not for its signing Secret, which the key is not read from.
func (r *Reconciler) hasRead(id types.NamespacedName, c *jwksv1alpha1.JWKSConfig, secret client.Object) bool {
	if secret.GetName() != c.Spec.CertificateSecret || secret.GetName() == c.Spec.SigningSecret || secret.GetResourceVersion() == "" {
		return false
	}
	v, ok := r.parsed.Load(id)
	return ok && v.(parsedCert).secret == secretVersion{name: secret.GetName(), algorithm: c.Spec.Algorithm, uid: secret.GetUID(), resourceVersion: secret.GetResourceVersion()}
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
// JWKSConfigs whose promotion they may let go on: those a new report names; those whose
// entry a changed report adds or gives another key (promote reads only which key a server
// answers); and, when a server stops (deletes its Lease), every JWKSConfig whose key
// waits for the servers. Nothing else can let a promotion go on: not an entry left as it
// was (a report names every key waiting to sign that its server answers, so a burst of
// them changes it many times), nor one removed (its key no longer waits, or that server
// no longer answers it: a wait can only grow).
// A renewal that changes no report maps to nothing; a report that runs out brings nothing
// back, the waiting JWKSConfig asks to come back then.
func (r *Reconciler) serverReports() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], id string) {
		if ns, name, ok := strings.Cut(id, "/"); ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	reportOf := func(o client.Object) (jwkshttp.Report, bool) {
		lease, ok := o.(*coordinationv1.Lease)
		if !ok {
			return nil, false
		}
		return jwkshttp.ReportOf(lease).Serving, true
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			report, _ := reportOf(e.Object)
			for id := range report {
				enqueue(q, id)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetAnnotations()[jwksv1alpha1.ServingAnnotation] == e.ObjectNew.GetAnnotations()[jwksv1alpha1.ServingAnnotation] {
				return
			}
			was, okOld := reportOf(e.ObjectOld)
			is, okNew := reportOf(e.ObjectNew)
			if !okOld || !okNew {
				return
			}
			for id, served := range is {
				if before, ok := was[id]; !ok || before.KeyID != served.KeyID {
					enqueue(q, id)
				}
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
