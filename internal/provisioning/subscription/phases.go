package subscription

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/status"
)

// requestOf is what sr asks for.
func requestOf(sr *cp.SubscriptionRequest) (credentialpool.Request, error) {
	tenant, err := credentialpool.ParseSelector(sr.Spec.SubscriptionSelector)
	if err != nil {
		return credentialpool.Request{}, err
	}
	return credentialpool.Request{Provider: sr.Spec.Provider, Region: sr.Spec.Region, Tenant: tenant, EUAccess: sr.Spec.EUAccess}, nil
}

// checkGrant lets a request have a dedicated credential only for a global account its
// namespace is granted: the global account is whatever the request says, so without a
// grant one tenant could claim every free credential with made-up accounts. The grant is
// the operator's annotation on the Namespace, which tenants cannot write; requests in the
// operator's own namespace need none.
func (r *Reconciler) checkGrant(ctx context.Context, sr *cp.SubscriptionRequest, account string) error {
	if sr.Namespace == r.pool.operatorNamespace {
		return nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: sr.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading the grants of namespace %s: %w", sr.Namespace, err)
	}
	grants := ns.Annotations[cp.AnnotationGlobalAccounts]
	if credentialpool.Granted(grants, account) {
		return nil
	}
	// The Namespace watch brings the request back when its grants change.
	return status.Waiting(cp.ReasonGlobalAccountNotGranted,
		"global account %s is not granted to namespace %s, so no dedicated credential is claimed for it; the operator grants it with: kubectl annotate namespace %s %s=%q --overwrite",
		account, sr.Namespace, sr.Namespace, cp.AnnotationGlobalAccounts, credentialpool.Grant(grants, account)).Warn()
}

// assign claims a credential for the request. A claim lost to a concurrent one (another
// request, another replica) is retried at once with a fresh, uncached view of the pool.
func (r *Reconciler) assign(ctx context.Context, sr *cp.SubscriptionRequest, want credentialpool.Request) error {
	reader := client.Reader(r.pool.cache)
	for range 5 {
		name, claim, err := r.choose(ctx, reader, sr, want)
		if errors.Is(err, credentialpool.ErrPoolExhausted) {
			sr.Status.GardenerSecretName = ""
			// The pool watch brings the request back when a credential appears.
			return status.Waiting(cp.ReasonPoolExhausted, "%s; waiting for the pool to change", r.pool.exhausted(sr, err)).Warn()
		}
		if err != nil {
			return err
		}
		if claim {
			if err := r.checkDirtyQuota(ctx, sr); err != nil {
				sr.Status.GardenerSecretName = ""
				return err
			}
			if err := r.claim(ctx, r.pool.namespaceFor(sr), name, want.Tenant, sr); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					reader = r.pool.fresh // someone else was faster: look again, uncached
					continue
				}
				return err
			}
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, cp.ReasonAssigned, "Assign", "assigned credential %s", name)
		assigned(sr, name)
		return nil
	}
	return fmt.Errorf("lost the race for a %s credential five times; retrying", sr.Spec.Provider)
}

// checkDirtyQuota lets a namespace claim a credential only while fewer dirty credentials
// than the quota were claimed from it: each release leaves its credential dirty until an
// operator cleans and hands it back, so a namespace that deletes and recreates its
// requests would otherwise take a new one per cycle. The pool watch brings the request
// back when one is handed back.
func (r *Reconciler) checkDirtyQuota(ctx context.Context, sr *cp.SubscriptionRequest) error {
	quota := r.opts.DirtyQuotaPerNamespace
	if quota == 0 {
		return nil
	}
	entries := r.pool.newList()
	if err := r.pool.cache.List(ctx, entries, client.InNamespace(r.pool.namespaceFor(sr)), client.MatchingLabels{cp.LabelDirty: "true"}); err != nil {
		return fmt.Errorf("listing the pool's dirty %ss: %w", r.pool.gvk.Kind, err)
	}
	var dirty []string
	for _, e := range entries.Items {
		if ns, _, _ := strings.Cut(e.Annotations[cp.AnnotationClaimedBy], "/"); ns == sr.Namespace {
			dirty = append(dirty, e.Name)
		}
	}
	if len(dirty) < quota {
		return nil
	}
	return status.Waiting(cp.ReasonDirtyQuotaReached,
		"namespace %s holds %d dirty credentials (%s), its quota is %d (--subscription-dirty-quota-per-namespace): no more is claimed for it until the operator cleans and hands one back",
		sr.Namespace, len(dirty), strings.Join(dirty, ", "), quota).Warn()
}

// list reads the pool's entries of the pool namespace that may serve requests of namespace
// tenant.
func (r *Reconciler) list(ctx context.Context, reader client.Reader, ns, tenant string) ([]credentialpool.Credential, error) {
	entries := r.pool.newList()
	if err := reader.List(ctx, entries, client.InNamespace(ns), client.HasLabels{cp.LabelHyperscalerType}); err != nil {
		return nil, fmt.Errorf("listing the pool's %ss in %s: %w", r.pool.gvk.Kind, ns, err)
	}
	out := make([]credentialpool.Credential, 0, len(entries.Items))
	for _, e := range entries.Items {
		if !claimableBy(&e, tenant) {
			continue // another tenant's: never a candidate, whatever account is asked for
		}
		out = append(out, credentialpool.Credential{Name: e.Name, Labels: e.Labels})
	}
	return out, nil
}

// claimableBy: the pool entry may serve a request of namespace tenant: a shared one, a
// free one (no tenantName: a claim record left after a hand-back no longer counts), or
// one claimed by tenant. A dedicated one claimed from another namespace, or labelled
// tenantName with no record of whose it is, serves no one else.
func claimableBy(e *metav1.PartialObjectMetadata, tenant string) bool {
	if e.Labels[cp.LabelShared] == "true" && e.Labels[cp.LabelInternal] != "true" {
		return true
	}
	if _, claimed := e.Labels[cp.LabelTenantName]; !claimed {
		return true
	}
	return claimedBy(e, tenant)
}

// claimedBy: the pool entry is a dedicated credential claimed for namespace tenant:
// labelled tenantName, with tenant's claim record.
func claimedBy(e *metav1.PartialObjectMetadata, tenant string) bool {
	if _, claimed := e.Labels[cp.LabelTenantName]; !claimed {
		return false
	}
	ns, _, _ := strings.Cut(e.Annotations[cp.AnnotationClaimedBy], "/")
	return ns != "" && ns == tenant
}

func (r *Reconciler) choose(ctx context.Context, reader client.Reader, sr *cp.SubscriptionRequest, want credentialpool.Request) (string, bool, error) {
	credentials, err := r.list(ctx, reader, r.pool.namespaceFor(sr), sr.Namespace)
	if err != nil {
		return "", false, err
	}
	var usage map[string]int
	if want.Tenant == "" || want.Limit > 0 {
		users, err := r.users(ctx, r.pool.namespaceFor(sr))
		if err != nil {
			return "", false, err
		}
		usage = make(map[string]int, len(users))
		for name, u := range users {
			usage[name] = len(u)
		}
	}
	return credentialpool.Choose(want, credentials, usage)
}

// users are, per credential, who uses it: requests assigned to it ("<namespace>/<name>")
// and, with the garden pool, the project's Shoots that reference it (a Shoot of a Cluster
// counts as that Cluster's request, named as the Cluster; any other Shoot, KEB's say, as
// itself). The pool serves requests of every namespace.
func (r *Reconciler) users(ctx context.Context, poolNamespace string) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	add := func(credential, user string) {
		if out[credential] == nil {
			out[credential] = map[string]bool{}
		}
		out[credential][user] = true
	}
	requests := &cp.SubscriptionRequestList{}
	if err := r.Client.List(ctx, requests); err != nil {
		return nil, fmt.Errorf("listing SubscriptionRequests: %w", err)
	}
	for _, sr := range requests.Items {
		if n := sr.Status.GardenerSecretName; n != "" {
			add(n, sr.Namespace+"/"+sr.Name)
		}
	}
	if r.pool.shoots == nil {
		return out, nil
	}
	shoots := &unstructured.UnstructuredList{}
	shoots.SetGroupVersionKind(shoot.GVK.GroupVersion().WithKind("ShootList"))
	if err := r.pool.shoots.List(ctx, shoots, client.InNamespace(poolNamespace)); err != nil {
		return nil, fmt.Errorf("listing the Shoots of %s: %w", poolNamespace, err)
	}
	for _, s := range shoots.Items {
		n, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName")
		if n == "" {
			continue
		}
		add(n, shootUser(&s))
	}
	return out, nil
}

// shootUser names the user a Shoot stands for: its Cluster's request, or itself.
func shootUser(s *unstructured.Unstructured) string {
	l := s.GetLabels()
	if ns, name := l[operatorv1alpha1.ClusterNamespaceLabel], l[operatorv1alpha1.ClusterNameLabel]; ns != "" && name != "" {
		return ns + "/" + name
	}
	return "shoot " + s.GetNamespace() + "/" + s.GetName()
}

// claim labels a free credential for the global account tenant and records the
// requesting namespace as its owner. The patch carries the resourceVersion read, so of
// two concurrent claims exactly one succeeds; the other gets a conflict.
func (r *Reconciler) claim(ctx context.Context, ns, name, tenant string, sr *cp.SubscriptionRequest) error {
	entry := r.pool.newEntry(ns, name)
	if err := r.pool.fresh.Get(ctx, client.ObjectKeyFromObject(entry), entry); err != nil {
		return err
	}
	if t, claimed := entry.Labels[cp.LabelTenantName]; (claimed && t != tenant) || !claimableBy(entry, sr.Namespace) {
		return apierrors.NewConflict(schema.GroupResource{Group: r.pool.gvk.Group, Resource: r.pool.gvk.Kind}, name, errors.New("claimed by another tenant"))
	}
	before := entry.DeepCopy()
	if entry.Labels == nil {
		entry.Labels = map[string]string{}
	}
	if entry.Annotations == nil {
		entry.Annotations = map[string]string{}
	}
	entry.Labels[cp.LabelTenantName] = tenant
	entry.Annotations[cp.AnnotationClaimedBy] = sr.Namespace + "/" + sr.Name
	return status.WriteFailed("patch", entry, r.pool.writer.Patch(ctx, entry, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// patchLabel sets one label of entry with a merge patch that carries entry's
// resourceVersion: a concurrent change makes it fail with a conflict.
func (r *Reconciler) patchLabel(ctx context.Context, entry *metav1.PartialObjectMetadata, key, value string) error {
	before := entry.DeepCopy()
	if entry.Labels == nil {
		entry.Labels = map[string]string{}
	}
	entry.Labels[key] = value
	err := r.pool.writer.Patch(ctx, entry, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	return status.WriteFailed("patch", entry, err)
}

// stillFits: the assigned credential exists and still serves the request. Only the API
// server's word takes a credential away: what the cache says against it (missing, or
// labelled otherwise: a cache that trails, or is being filled again after the API server
// restarted) is read again uncached, and a failed read is an error to retry, never a
// reason to assign another credential. (Found by the chaos suite, seed
// 2511568597773103352: three requests moved to other credentials after an API server
// restart.)
func (r *Reconciler) stillFits(ctx context.Context, sr *cp.SubscriptionRequest, want credentialpool.Request) (bool, error) {
	entry := r.pool.newEntry(r.pool.namespaceFor(sr), sr.Status.GardenerSecretName)
	key := client.ObjectKeyFromObject(entry)
	if err := r.pool.cache.Get(ctx, key, entry); err == nil && fits(entry, sr, want) {
		return true, nil
	}
	switch err := r.pool.fresh.Get(ctx, key, entry); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the assigned credential %s: %w", key.Name, err)
	}
	return fits(entry, sr, want), nil
}

func fits(entry *metav1.PartialObjectMetadata, sr *cp.SubscriptionRequest, want credentialpool.Request) bool {
	return claimableBy(entry, sr.Namespace) && credentialpool.Fits(want, credentialpool.Credential{Name: entry.Name, Labels: entry.Labels})
}

// release marks a dedicated credential dirty once nothing uses it any more: no other
// request, no Shoot (KEB's rule), and waits while the request's own Shoot still exists.
func (r *Reconciler) release(ctx context.Context, sr *cp.SubscriptionRequest) error {
	if !Finalizer.Held(sr) {
		return nil
	}
	if name := sr.Status.GardenerSecretName; name != "" {
		if err := r.releaseCredential(ctx, sr, name); err != nil {
			return err
		}
	}
	return Finalizer.Release(ctx, r.Client, sr)
}

func (r *Reconciler) releaseCredential(ctx context.Context, sr *cp.SubscriptionRequest, name string) error {
	ns := r.pool.namespaceFor(sr)
	entry := r.pool.newEntry(ns, name)
	if err := r.pool.fresh.Get(ctx, client.ObjectKeyFromObject(entry), entry); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading credential %s: %w", name, err)
	}
	want, err := requestOf(sr)
	if err != nil || !claimedBy(entry, sr.Namespace) {
		// A free credential, another tenant's, or a request that could never claim: a
		// status naming it was never this controller's doing (a forged one, say), and
		// releasing it is not this request's to do.
		return nil
	}
	if err := r.checkHold(ctx, "releasing credential "+name); err != nil {
		return err
	}
	users, err := r.users(ctx, ns)
	if err != nil {
		return err
	}
	self := sr.Namespace + "/" + sr.Name
	others := len(users[name])
	if users[name][self] {
		others--
	}
	ownShoot, err := r.ownShootUses(ctx, sr, name)
	if err != nil {
		return err
	}
	// After the timeout the own Shoot no longer holds the credential (KEB's
	// shootWaitTimeout): it is released as if the Shoot were gone, and marked dirty only if
	// nothing else uses it.
	waited := r.clock.Since(sr.DeletionTimestamp.Time)
	timedOut := ownShoot && waited >= r.releaseShootTimeout
	if timedOut {
		ownShoot = false
	}
	outcome := credentialpool.Released(want, credentialpool.Credential{Name: name, Labels: entry.Labels}, others, ownShoot)
	if timedOut {
		r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, cp.ReasonReleaseTimedOut, "Release",
			"the request's Shoot still uses credential %s after %v (--subscription-release-shoot-timeout); released anyway, %s", name, r.releaseShootTimeout, releaseOutcome(outcome))
	}
	switch outcome {
	case credentialpool.WaitForShoot:
		// The Shoot watch brings the request back when the Shoot is gone; the timeout, if
		// the Shoot stays.
		return status.Waiting(cp.ReasonWaitingForShoot, "credential %s is released once the request's Shoot is gone (at most %v after the request's deletion)",
			name, r.releaseShootTimeout).After(r.releaseShootTimeout - waited)
	case credentialpool.MarkDirty:
		if err := r.patchLabel(ctx, entry, cp.LabelDirty, "true"); err != nil {
			return err
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, cp.ReasonReleased, "Release", "credential %s released and marked dirty", name)
	case credentialpool.Keep:
	}
	return nil
}

// releaseOutcome says what a release did, for its event.
func releaseOutcome(r credentialpool.Release) string {
	if r == credentialpool.MarkDirty {
		return "marked dirty: nothing else uses it"
	}
	return "not marked dirty: another Shoot or request uses it"
}

// ownShootUses: a Shoot of the request's Cluster still references the credential.
func (r *Reconciler) ownShootUses(ctx context.Context, sr *cp.SubscriptionRequest, name string) (bool, error) {
	if r.pool.shoots == nil {
		return false, nil
	}
	shoots := &unstructured.UnstructuredList{}
	shoots.SetGroupVersionKind(shoot.GVK.GroupVersion().WithKind("ShootList"))
	if err := r.pool.shoots.List(ctx, shoots, client.InNamespace(r.pool.namespace),
		client.MatchingLabels{operatorv1alpha1.ClusterNamespaceLabel: sr.Namespace, operatorv1alpha1.ClusterNameLabel: sr.Name}); err != nil {
		return false, fmt.Errorf("listing the Shoots of %s: %w", r.pool.namespace, err)
	}
	for _, s := range shoots.Items {
		if n, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName"); n == name {
			return true, nil
		}
	}
	return false, nil
}
