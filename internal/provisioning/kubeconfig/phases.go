package kubeconfig

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/slots"
	"github.com/trustplane/trustplane/internal/status"
)

// serve grants in the target what the spec asks for and issues a kubeconfig when the one
// published is not current: none yet, rotation due or asked for, or issued for where the
// target no longer is (its server, CA bundle or TLS server name changed: a brought-along
// Cluster's kubeconfig Secret was edited, say after the API server moved to another port).
func (r *Reconciler) serve(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target, held bool, now time.Time) (reconcile.Result, error) {
	moved := movedFrom(kr, target)
	if moved != "" {
		// The cache may not have the status of the reconcile that already issued for the
		// new endpoint: issuing again would only spend a token. The cache catches up
		// within moments (a status change is no event this controller is sent).
		if current, err := r.isCurrent(ctx, kr); err != nil || !current {
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, stale(kr, target, moved, err)
		}
	}
	if err := r.grant(ctx, kr, target, held); errors.Is(err, clustertarget.ErrPreparing) {
		// Another worker prepares the target now: look again soon, the status as it is.
		return reconcile.Result{RequeueAfter: slots.Retry}, nil
	} else if err != nil {
		return reconcile.Result{}, stale(kr, target, moved, targetUnreachable(target, err))
	}
	rotateAt := r.rotateAt(kr)
	rotateNow := kr.Annotations[operatorv1alpha1.RotateAnnotation] == "true"
	if kr.Status.Kubeconfig == "" || rotateNow || !now.Before(rotateAt) || moved != "" {
		if kr.Status.Kubeconfig == "" {
			// A first issue acts only on the request as stored: a cache that has not seen
			// the status of the reconcile that just issued (another event brought the
			// request back at once) would issue a second credential no status names, live
			// until it expires. The cache catches up within moments; the status stays.
			if issued, err := r.issuedAlready(ctx, kr); err != nil || issued {
				return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, err
			}
		}
		if err := r.rotate(ctx, kr, target, rotateNow, now); err != nil {
			return reconcile.Result{}, stale(kr, target, moved, err)
		}
		if moved != "" {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonTargetChanged, "Issue",
				"issued a new kubeconfig for cluster %s: %s since the previous one was issued", target.Name, moved)
		}
		rotateAt = r.rotateAt(kr)
	}
	status.MarkReady(kr, operatorv1alpha1.ReasonIssued, fmt.Sprintf("kubeconfig for cluster %s valid until %s", target.Name, kr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339)))
	return reconcile.Result{RequeueAfter: max(rotateAt.Sub(now), time.Second)}, nil
}

// grant applies the ServiceAccount and the roles the spec asks for. A spec edit may have
// removed or moved rules: unless this generation is reported issued, what an old spec
// granted goes first, found by label in every namespace, before the new spec is applied
// (which may fail, e.g. for a namespace the target does not have yet). What the new spec
// still asks for is kept. A request that never held anything has nothing to look for.
//
// Only Ready=True for the generation says its grants are exactly its spec:
// observedGeneration also advances for a generation judged Stalled (a write the target
// refused, say a deletion of an old grant), whose grants may be half done. Found by the
// chaos suite ("kubeconfig: granted as asked").
func (r *Reconciler) grant(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target, held bool) error {
	// First, as it fails at once for a target found unreachable moments ago.
	if err := ensureNamespace(ctx, target); err != nil {
		return err
	}
	if held && mayHoldAnOldSpec(kr) {
		keepRoleIn := ""
		if kr.Spec.Role != nil {
			keepRoleIn = kr.Spec.Role.Namespace
		}
		if err := deleteRBAC(ctx, target.Client, targetName(kr), keepRoleIn, kr.Spec.ClusterRole != nil); err != nil {
			return err
		}
	}
	return r.applyRBAC(ctx, kr, target)
}

// mayHoldAnOldSpec says whether what the request holds may be what an earlier spec asked
// for: unless Ready=True for this generation says its grants are exactly this spec.
// observedGeneration alone does not: it also advances for a generation judged Stalled or
// not ready by request (revoked), whose grants may be half done or none.
func mayHoldAnOldSpec(kr *operatorv1alpha1.KubeconfigRequest) bool {
	return !status.IsReadyForGeneration(kr)
}

// movedFrom says how the target's endpoint differs from the one the published kubeconfig
// was issued for, in words naming at most the servers' hosts; "" when nothing is
// published or it still fits. The published kubeconfig itself is the record: nothing
// else needs to be kept, and one issued by an earlier version is checked alike.
func movedFrom(kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target) string {
	if kr.Status.Kubeconfig == "" {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		return "the published kubeconfig does not decode"
	}
	issued, err := access.EndpointOf(raw)
	if err != nil {
		return "the published kubeconfig names no cluster"
	}
	return issued.Moved(target.Endpoint())
}

// isCurrent says whether kr, as read from the cache, is the stored version.
func (r *Reconciler) isCurrent(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	stored := &metav1.PartialObjectMetadata{}
	stored.SetGroupVersionKind(operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		return false, fmt.Errorf("reading KubeconfigRequest %s/%s: %w", kr.Namespace, kr.Name, err)
	}
	return stored.ResourceVersion == kr.ResourceVersion, nil
}

// grantedIn is the Cluster the request's grants live in, if any. Before the request's
// first status is stored, they may live in the Cluster admission recorded at its creation
// (a reconcile that granted there may have died before its status write). A request
// issued by an earlier version, which did not record it, holds them in the Cluster it
// names.
func grantedIn(kr *operatorv1alpha1.KubeconfigRequest) *types.NamespacedName {
	if recorded, ok := kr.RecordedCluster(); ok {
		return &recorded
	}
	if kr.Status.IssuedAt != nil {
		key := kr.ClusterKey()
		return &key
	}
	return nil
}

// deny withdraws whatever the request holds (a request denied now must not keep what an
// earlier spec or grant gave it) and reports the denial: Stalled, until the spec, the
// ceiling or the Cluster's grant changes.
func (r *Reconciler) deny(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, reason, message string) error {
	if held := grantedIn(kr); held != nil || kr.Status.Kubeconfig != "" {
		// Only an issued kubeconfig is news; a record of where grants may live (made at
		// creation, or stored since) may be all there is, and withdrawing is a precaution.
		handedOut := kr.Status.IssuedAt != nil || kr.Status.Kubeconfig != ""
		if held == nil {
			if err := r.unpublish(ctx, kr); err != nil {
				return fmt.Errorf("%s; withdrawing the kubeconfig: %w", message, err)
			}
		} else if err := r.withdraw(ctx, kr, *held); err != nil {
			return status.Transient(reason, fmt.Errorf("%s; the kubeconfig is withdrawn, and deleting what it was granted in Cluster %s is pending: %w", message, held, err))
		}
		if handedOut {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, reason, "Withdraw", "withdrew the kubeconfig: %s", message)
		}
	}
	return status.Stalled(reason, "%s", message)
}

// overCeiling is why the request's rules exceed the ceiling: a ClusterRole's rules reach
// every namespace, a Role's only its own.
func (r *Reconciler) overCeiling(kr *operatorv1alpha1.KubeconfigRequest) []string {
	c := r.opts.ceiling()
	var problems []string
	if kr.Spec.ClusterRole != nil {
		for _, p := range c.Check(toRBAC(kr.Spec.ClusterRole.Rules), "") {
			problems = append(problems, "clusterRole "+p)
		}
	}
	if kr.Spec.Role != nil {
		for _, p := range c.Check(toRBAC(kr.Spec.Role.Rules), kr.Spec.Role.Namespace) {
			problems = append(problems, "role "+p)
		}
	}
	return problems
}

// podSecurity is why the request's Role may not write workloads in its namespace of the
// target: only where the target enforces Pod Security baseline or restricted
// (access.Ceiling.PodSecurity). The level is read from the target on every reconcile that
// needs it, so a namespace relabelled to privileged is seen at the next one (a rotation,
// or any change of the request's annotations).
func (r *Reconciler) podSecurity(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target) ([]string, error) {
	if kr.Spec.Role == nil || !access.WritesWorkloads(toRBAC(kr.Spec.Role.Rules)) {
		return nil, nil
	}
	if err := target.Down(); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: kr.Spec.Role.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", kr.Spec.Role.Namespace, err)
	}
	var problems []string
	for _, p := range r.opts.ceiling().PodSecurity(toRBAC(kr.Spec.Role.Rules), kr.Spec.Role.Namespace, ns.Labels[access.PodSecurityEnforceLabel]) {
		problems = append(problems, "role "+p)
	}
	return problems, nil
}

// issuedAlready says whether the request as stored already holds a kubeconfig.
func (r *Reconciler) issuedAlready(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	stored := &operatorv1alpha1.KubeconfigRequest{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(kr), stored); err != nil {
		return false, fmt.Errorf("reading KubeconfigRequest %s/%s: %w", kr.Namespace, kr.Name, err)
	}
	return stored.Status.Kubeconfig != "", nil
}

// rotate issues a (first or new) credential, resets the rotate annotation when it asked
// for this, and prunes the bindings of expired credentials.
func (r *Reconciler) rotate(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target, rotateNow bool, now time.Time) error {
	taken, err := r.secretNameTaken(ctx, kr)
	if err != nil {
		return err
	}
	if taken {
		// The Secret watch brings the request back when that Secret goes.
		return status.Stalled(operatorv1alpha1.ReasonSecretNameTaken, "Secret %s/%s exists and is not this request's: delete or rename it", kr.Namespace, secretName(kr))
	}
	// The credential the status hands out until the status write that replaces it: that
	// write may yet fail, or the manager die before it, and what the status says is
	// issued must keep working (the binding name is in its token).
	handedOut := ""
	if raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig); err == nil {
		handedOut = access.BoundSecretOf(raw)
	}
	rotating := kr.Status.Kubeconfig != ""
	binding, err := r.issue(ctx, kr, target, now)
	if err != nil {
		return err
	}
	if rotateNow {
		if err := resetRotate(ctx, r.Client, kr); err != nil {
			return err
		}
	}
	if rotating { // a first issue has no older binding to prune
		if err := r.pruneBindings(ctx, kr, target, binding, handedOut, now); err != nil {
			return targetUnreachable(target, err)
		}
	}
	return nil
}

// resetRotate sets the rotate annotation back to "false". The patch answers with the
// object as stored, whose spec may be newer than the one this reconcile granted: kr keeps
// the spec and generation it was read with (only the annotation changes), or the status
// would report a generation Ready whose grants were never made. Found by the chaos suite
// ("kubeconfig: granted as asked": a rotation asked for just before a spec edit).
func resetRotate(ctx context.Context, c client.Client, kr *operatorv1alpha1.KubeconfigRequest) error {
	stored := kr.DeepCopy()
	patch := client.MergeFrom(kr.DeepCopy())
	stored.Annotations[operatorv1alpha1.RotateAnnotation] = "false"
	if err := c.Patch(ctx, stored, patch); err != nil {
		return status.WriteFailed("patch", kr, err)
	}
	kr.Annotations[operatorv1alpha1.RotateAnnotation] = "false"
	return nil
}

// rotateAt is when the current credential is renewed: a fraction into its lifetime.
func (r *Reconciler) rotateAt(kr *operatorv1alpha1.KubeconfigRequest) time.Time {
	if kr.Status.IssuedAt == nil || kr.Status.ExpirationTimestamp == nil {
		return time.Time{}
	}
	life := kr.Status.ExpirationTimestamp.Sub(kr.Status.IssuedAt.Time)
	return kr.Status.IssuedAt.Add(time.Duration(float64(life) * r.opts.RotateFraction))
}

// issue binds a new token to a fresh binding Secret in the target, so that deleting the
// binding revokes exactly this request's token, and publishes the kubeconfig. It returns
// the binding's name.
func (r *Reconciler) issue(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *clustertarget.Target, now time.Time) (string, error) {
	name := targetName(kr)
	// The server may shorten the lifetime, never lengthen it: the requested expiry is a
	// safe time to delete the binding.
	annotations := requestAnnotations(kr)
	annotations[expiresAnnotation] = now.Add(time.Duration(kr.Spec.Expiration) * time.Second).UTC().Format(time.RFC3339)
	binding := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: TargetNamespace,
		Labels: requestLabels(kr, t), Annotations: annotations}}
	if err := t.Client.Create(ctx, binding); err != nil {
		return "", targetUnreachable(t, status.WriteFailed("create token binding", binding, err))
	}
	tr, err := t.Kube.CoreV1().ServiceAccounts(TargetNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(kr.Spec.Expiration),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: binding.Name, UID: binding.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", targetUnreachable(t, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", TargetNamespace, name, err))
	}
	raw, err := access.Kubeconfig(t.Name, t.Endpoint(), name, tr.Status.Token)
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: secretName(kr), Namespace: kr.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kr, operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))}},
		Data: map[string][]byte{"kubeconfig": raw}}
	if err := createOrApply(ctx, r.Client, secret, kr.Status.IssuedAt == nil); err != nil {
		// The token was never handed out: revoke it now rather than leave its binding
		// until the next rotation prunes it (best effort; every retry issues a new one).
		_ = t.Client.Delete(ctx, binding)
		return "", fmt.Errorf("publishing the kubeconfig: %w", err)
	}
	// A rotation is news to whoever holds the old credential; a first issue is told by
	// the Ready condition (reason Issued) the status write brings anyway: an event too
	// would be one more API request per request for nothing new.
	rotated := kr.Status.Kubeconfig != ""
	kr.Status.Kubeconfig = base64.StdEncoding.EncodeToString(raw)
	kr.Status.SecretName = secret.Name
	kr.Status.ExpirationTimestamp = &metav1.Time{Time: tr.Status.ExpirationTimestamp.Time}
	kr.Status.IssuedAt = &metav1.Time{Time: now.Truncate(time.Second)}
	if rotated {
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonIssued, "Issue", "issued a new kubeconfig for cluster %s, valid until %s; the one before stays valid until it expires",
			t.Name, tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
	}
	return binding.Name, nil
}

// pruneBindings deletes the token bindings of the request that are expired or no longer
// needed. It keeps current, the binding of the credential just issued; handedOut, that of
// the credential the stored status still hands out, until its status write replaces it;
// and the newest other one, until it expires: the credential current replaced, which
// whoever read the published Secret may hold. Three at most: a rotation retried after the
// manager died between issuing and its status write prunes the credential published
// only by that lost attempt, never the one the status names.
func (r *Reconciler) pruneBindings(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, t *clustertarget.Target, current, handedOut string, now time.Time) error {
	list := &corev1.SecretList{}
	if err := t.Client.List(ctx, list, client.InNamespace(TargetNamespace), client.MatchingLabels{RequestLabel: targetName(kr)}); err != nil {
		return fmt.Errorf("listing token bindings: %w", err)
	}
	// Newest first by when their tokens expire: creation timestamps have a resolution of a
	// second, too coarse to order rotations that follow each other quickly. Credentials
	// issued within the same second (the target moved twice, say) tie on both; current is
	// kept by name whatever its place. A binding without a readable expiry sorts last.
	expiry := func(s *corev1.Secret) time.Time {
		expires, _ := time.Parse(time.RFC3339, s.Annotations[expiresAnnotation])
		return expires
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		ei, ej := expiry(&list.Items[i]), expiry(&list.Items[j])
		if !ei.Equal(ej) {
			return ei.After(ej)
		}
		return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
	})
	keptOther := false
	for i := range list.Items {
		b := &list.Items[i]
		expires := expiry(b)
		live := expires.IsZero() || now.Before(expires)
		switch {
		case b.Name == current:
			continue
		case b.Name == handedOut && live:
			continue
		case !keptOther && live:
			keptOther = true
			continue
		}
		if err := client.IgnoreNotFound(t.Client.Delete(ctx, b)); err != nil {
			return status.WriteFailed("delete", b, err)
		}
	}
	return nil
}

// revoke withdraws the kubeconfig: at once from the status and the published Secret, even
// when the target cannot be reached; then the token bindings (the target API server
// rejects their tokens from then on), the ServiceAccount and the roles in the target.
// Nothing is issued while revoke is "true".
func (r *Reconciler) revoke(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	had := kr.Status.Kubeconfig != ""
	var err error
	if held := grantedIn(kr); held != nil {
		err = r.withdraw(ctx, kr, *held)
		if err != nil {
			err = fmt.Errorf("revoked: the kubeconfig is gone from the status and the Secret; deleting its token bindings, ServiceAccount and roles in Cluster %s is pending (its token stays valid there until then): %w", held, err)
		}
	} else {
		err = r.unpublish(ctx, kr)
	}
	if had && kr.Status.Kubeconfig == "" {
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonRevoked, "Revoke", "revoked the kubeconfig for cluster %s", kr.Spec.Cluster)
	}
	if err != nil {
		// Not Ready whatever generation was: the credential this generation was Ready
		// with is revoked.
		status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonRevokePending, "")
		return status.Transient(operatorv1alpha1.ReasonRevokePending, err)
	}
	status.MarkNotReady(kr, operatorv1alpha1.ReasonRevoked, "revoked; set "+operatorv1alpha1.RevokeAnnotation+` to "false" to issue a new kubeconfig`)
	return nil
}

// unpublish clears the kubeconfig from the status and deletes the published Secret: the
// management cluster's part of a withdrawal, which never waits for a target cluster.
func (r *Reconciler) unpublish(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) error {
	taken, err := r.secretNameTaken(ctx, kr)
	if err != nil {
		return err
	}
	if !taken { // someone else's Secret of that name is never deleted
		published := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kr.Namespace, Name: secretName(kr)}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, published)); err != nil {
			return status.WriteFailed("delete", published, err)
		}
	}
	kr.Status.Kubeconfig, kr.Status.SecretName, kr.Status.ExpirationTimestamp, kr.Status.IssuedAt = "", "", nil, nil
	return nil
}

// withdraw unpublishes the kubeconfig and deletes everything the request holds in the
// Cluster at key, found by label: token bindings first (their tokens die with them), then
// the ServiceAccount, then roles and bindings in every namespace. A Cluster that is gone,
// or is going with no way in left, has nothing more to withdraw (an event says so).
func (r *Reconciler) withdraw(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) error {
	if err := r.unpublish(ctx, kr); err != nil {
		return err
	}
	report, err := r.reporter(ctx, kr, key)
	if err != nil {
		return err
	}
	t, err := r.targets.Get(ctx, key)
	switch {
	case errors.Is(err, clustertarget.ErrClusterGone):
		// A Cluster waits for the requests holding grants in it before it goes, so this is
		// a cluster that never was.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonClusterGone, "Withdraw", "%v: nothing to clean up", err)
	case errors.Is(err, clustertarget.ErrNoWayIn):
		// Holding on would hold the Cluster, and with it its namespace, for ever.
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonTargetNotCleanedUp, "Withdraw",
			"%v: the ServiceAccount, roles and bindings labelled %s=%s stay in the target", report(err), RequestLabel, targetName(kr))
	case err != nil:
		return report(err)
	default:
		// Left unclassified: the caller says what is pending (a persistent refusal by the
		// target, RBAC there say, is still recognised as one). A target found unreachable
		// moments ago is not waited for again.
		err := t.Down()
		if err == nil {
			err = deleteEverything(ctx, t.Client, kr)
			t.Unreachable(err)
		}
		if err != nil {
			return report(fmt.Errorf("cluster %s: %w", t.Name, t.Redact(err)))
		}
	}
	kr.Status.GrantedIn = nil
	return nil
}

// reporter says how a failure to withdraw from the Cluster at key reaches the request.
// The Cluster named by status.grantedIn is acted on even when it does not grant the
// request's namespace: it may have stopped granting it, and what the request holds there
// must go. A forged status (possible only without the admission policy
// trustplane-status-writers) names such a Cluster too, and the two cannot be told apart.
// Acting there is harmless (deleteEverything touches only objects labelled with this
// request's own targetName), but what happens there is about someone else's Cluster: its
// kubeconfig, its server, its Shoot. So for a Cluster that does not grant the request's
// namespace, the request learns only that the withdrawal is pending; the cause goes to
// the manager's log.
func (r *Reconciler) reporter(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest, key types.NamespacedName) (func(error) error, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, key, cluster); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Cluster %s: %w", key, err)
	} else if err != nil || cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
		return func(err error) error { return err }, nil
	}
	return func(err error) error {
		ctrl.LoggerFrom(ctx).Info("withdrawing from a Cluster that does not grant the request's namespace", "cluster", key, "error", err.Error())
		return fmt.Errorf("cluster %s does not grant namespace %s: the cause is in the manager's log, not reported here", key, kr.Namespace)
	}, nil
}

// secretName is the Secret the kubeconfig is published in.
func secretName(kr *operatorv1alpha1.KubeconfigRequest) string { return kr.Name + publishedNameSuffix }

// secretNameTaken says whether a Secret of the published name exists that this request
// does not control (a user's, say a brought-along cluster's admin kubeconfig): it is
// never overwritten or deleted. Read from the metadata cache: no API call.
func (r *Reconciler) secretNameTaken(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) (bool, error) {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: kr.Namespace, Name: secretName(kr)}, existing); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !metav1.IsControlledBy(existing, kr), nil
}
