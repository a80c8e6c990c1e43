package dataplaneagent

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// Reconcile re-checks everything followed: the local secrets (and ingresses) against the
// published checksums.
func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if wait := a.debounce.Wait(reconcileKey.Name); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var ingressErr error
	if a.opts.Ingresses {
		ingressErr = a.verifyIngresses(ctx) // never holds the secrets back
	}
	return reconcile.Result{}, errors.Join(ingressErr, a.verifySecrets(ctx))
}

// verifySecrets writes the secrets to disk when they are trusted, and otherwise keeps
// the last verified set and reports the difference.
func (a *Agent) verifySecrets(ctx context.Context) error {
	logger := log.FromContext(ctx)
	secrets := &corev1.SecretList{}
	if err := a.reader.List(ctx, secrets); err != nil {
		return fmt.Errorf("listing Secrets: %w", err)
	}
	local := a.localSet(secrets.Items)
	ids := make([]string, len(local))
	for i, s := range local {
		ids[i] = s.ID
	}
	published, byName, err := a.published(ctx, checksum.TrackSecrets)
	if err != nil {
		return err
	}
	v := dataplane.Decide(a.scope, ids, published, a.opts.FailOpen)
	against := byName[v.Against]
	if !a.report(logger, checksum.TrackSecrets, v, against) {
		return nil
	}
	served := append(local, a.keepUnversioned(logger, secrets.Items, local)...)
	sort.Slice(served, func(i, j int) bool { return served[i].Base() < served[j].Base() })
	return a.serve(ctx, dataplane.Snapshot{Checksum: v.Checksum, Secrets: served}, v.Reason, against)
}

// keepUnversioned is what the verified set on disk holds of Secrets that still exist but
// are no longer counted — they lost their version annotation, or their new content does
// not load (a certificate and key that are not a pair, a lost ID or type) — unless an
// operator confirmed the removal (dataplane.RemoveUnversionedAnnotation): their last
// verified files stay served. Input the data plane cannot use never takes a verified key
// away. The checksum no longer counts them, so nothing newer of theirs is ever written; a
// Secret deleted, confirmed, or counted again leaves this list. Each newly kept Secret
// gets a Warning event; trustplane_dataplane_unversioned_kept counts them.
func (a *Agent) keepUnversioned(logger interface{ Info(string, ...any) }, items []corev1.Secret, local []dataplane.Secret) []dataplane.Secret {
	a.mu.Lock()
	served, have := a.served.Secrets, a.haveServed
	a.mu.Unlock()
	verified := map[string]bool{}
	for _, s := range local {
		verified[s.Base()] = true
	}
	uncounted := map[string]*corev1.Secret{}
	for i := range items {
		s := &items[i]
		if s.Annotations[dataplane.RemoveUnversionedAnnotation] != "true" {
			uncounted[a.base(s)] = s
		}
	}
	var kept []dataplane.Secret
	keptNow := map[string]bool{}
	for _, s := range served {
		secret := uncounted[s.Base()]
		if !have || verified[s.Base()] || secret == nil {
			continue
		}
		kept = append(kept, s)
		keptNow[s.Base()] = true
		if !a.keptBefore[s.Base()] {
			a.reportKept(logger, secret, s)
		}
	}
	a.keptBefore = keptNow
	unversionedKept.Set(float64(len(kept)))
	return kept
}

// reportKept says once, in the log and a Warning event on the Secret, why its last
// verified files stay.
func (a *Agent) reportKept(logger interface{ Info(string, ...any) }, secret *corev1.Secret, s dataplane.Secret) {
	if _, versioned := secret.Annotations[a.opts.VersionAnnotation]; !versioned {
		logger.Info("a served Secret lost its version annotation: its last verified files stay until the removal is confirmed", "secret", s.Base(), "id", s.ID)
		a.recorder.Eventf(secret, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonUnversionedKept, "Verify",
			"the Secret lost its annotation %s: the data plane keeps serving its last verified files (ID %s); put the annotation back, or confirm the removal by deleting the Secret or annotating it %s=true",
			a.opts.VersionAnnotation, s.ID, dataplane.RemoveUnversionedAnnotation)
		return
	}
	logger.Info("a served Secret's new content is not counted: its last verified files stay until the removal is confirmed", "secret", s.Base(), "id", s.ID)
	a.recorder.Eventf(secret, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonUncountedKept, "Verify",
		"the Secret's new content is not counted by the checksum (its certificate and key do not load as a pair, or it lost its numeric ID or TLS type): the data plane keeps serving its last verified files (ID %s); fix the Secret, or confirm the removal by deleting it or annotating it %s=true",
		s.ID, dataplane.RemoveUnversionedAnnotation)
}

// base is the file base name of the Secret s in the verified set.
func (a *Agent) base(s *corev1.Secret) string {
	if a.perNS {
		return s.Namespace + "." + s.Name
	}
	return s.Name
}

// verifyIngresses checks the Ingresses a Tengine-Ingress with the agent's class flags
// keeps against the IngressCheckSums.
func (a *Agent) verifyIngresses(ctx context.Context) error {
	classes, readable, err := a.classes.lookup(ctx)
	if !readable || err != nil {
		return err
	}
	ingresses := &networkingv1.IngressList{}
	if err := a.reader.List(ctx, ingresses); err != nil {
		return fmt.Errorf("listing Ingresses: %w", err)
	}
	var ids []string
	for _, ing := range ingresses.Items {
		id, err := a.opts.IngressClasses.IngressIDOfClass(ing.Name, ing.Annotations, ing.Spec.IngressClassName, a.opts.VersionAnnotation, classes)
		if err == nil {
			ids = append(ids, id)
		}
	}
	published, byName, err := a.published(ctx, checksum.TrackIngresses)
	if err != nil {
		return err
	}
	v := dataplane.Decide(a.scope, ids, published, a.opts.FailOpen)
	a.report(log.FromContext(ctx), checksum.TrackIngresses, v, byName[v.Against])
	return nil
}

// checksumObject is an empty unstructured object of a checksum kind, for watches and lists.
func checksumObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tenginev1.GroupVersion.WithKind(kind))
	return u
}

// published reads a track's checksum objects into the library's view, indexed by
// namespace/name so that events can go to the one a verdict names. Objects that do not
// decode are skipped and reported.
func (a *Agent) published(ctx context.Context, track checksum.Track) ([]dataplane.Published, map[string]client.Object, error) {
	kind := track.Kind()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tenginev1.GroupVersion.WithKind(kind + "List"))
	if err := a.reader.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing %ss: %w", kind, err)
	}
	var published []dataplane.Published
	byName := make(map[string]client.Object, len(list.Items))
	bad := map[string]bool{}
	for i := range list.Items {
		u := &list.Items[i]
		sum, ids, err := decodeSpec(kind, u)
		if err != nil {
			bad[string(u.GetUID())] = true
			a.reportUndecodable(ctx, track, u, err)
			continue
		}
		name := u.GetNamespace() + "/" + u.GetName()
		_, omitted := u.GetAnnotations()[dataplane.IDsOmittedAnnotation]
		published = append(published, dataplane.Published{Name: name, Checksum: sum, IDs: ids, Created: u.GetCreationTimestamp().Time,
			Scope: u.GetAnnotations()[dataplane.ScopeAnnotation], IDsOmitted: omitted})
		byName[name] = u
	}
	a.mu.Lock()
	a.undecodableOf[track] = bad // forget objects that are gone: a new one is reported anew
	a.mu.Unlock()
	undecodable.WithLabelValues(string(track)).Set(float64(len(bad)))
	return published, byName, nil
}

// decodeSpec converts an object into its Go type, as any data plane decodes it.
func decodeSpec(kind string, u *unstructured.Unstructured) (sum string, ids []string, err error) {
	if kind == checksum.KindSecretCheckSum {
		var o tenginev1.SecretCheckSum
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &o)
		return o.Spec.Checksum, o.Spec.IDs, err
	}
	var o tenginev1.IngressCheckSum
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &o)
	return o.Spec.Checksum, o.Spec.IDs, err
}

// localSet is every Secret with a valid ID, as the control plane computes it, with the
// files Tengine-Ingress would load from it.
func (a *Agent) localSet(items []corev1.Secret) []dataplane.Secret {
	var out []dataplane.Secret
	for _, s := range items {
		id, err := checksum.SecretID(s.Name, s.Annotations, a.opts.VersionAnnotation, s.Data)
		if err != nil {
			continue // left out on both sides alike; the control plane reports it
		}
		sec := dataplane.Secret{Name: s.Name, ID: id, CA: s.Data[checksum.KeyCACrt], CRL: s.Data[checksum.KeyCACRL]}
		if a.perNS {
			sec.Namespace = s.Namespace
		}
		// A Secret counts as a pair when both are there; otherwise it counted as CA-only.
		if crt, key := s.Data[checksum.KeyTLSCrt], s.Data[checksum.KeyTLSKey]; crt != nil && key != nil {
			sec.Crt, sec.Key = crt, key
		}
		out = append(out, sec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Base() < out[j].Base() })
	return out
}
