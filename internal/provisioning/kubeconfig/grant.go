package kubeconfig

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// connect reaches the Cluster's target cluster (clustertarget.Connections): its
// kubeconfig Secret, or Gardener's admin kubeconfig.
func (r *Reconciler) connect(ctx context.Context, s *scope) (reconcile.Result, error) {
	if s.cluster == nil {
		return reconcile.Result{}, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %s: %v", s.key, clustertarget.ErrClusterGone)
	}
	target, err := r.targets.Get(ctx, s.key)
	if err != nil {
		return reconcile.Result{}, status.Transient(operatorv1alpha1.ReasonClusterNotReady, err)
	}
	s.target = target
	return reconcile.Result{}, nil
}

// checkPodSecurity denies a Role that writes workloads in a namespace of the target that
// enforces Pod Security baseline or restricted (access.Ceiling.PodSecurity). The level is
// read from the target on every reconcile that needs it, so a namespace relabelled to
// privileged is seen at the next one (a rotation, or any change of the request's
// annotations).
func (r *Reconciler) checkPodSecurity(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr, target := s.kr, s.target
	if kr.Spec.Role == nil || !access.WritesWorkloads(access.Rules(kr.Spec.Role.Rules)) {
		return reconcile.Result{}, nil
	}
	if err := target.Down(); err != nil {
		return reconcile.Result{}, targetUnreachable(target, err)
	}
	ns := &corev1.Namespace{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: kr.Spec.Role.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, targetUnreachable(target, fmt.Errorf("reading namespace %s: %w", kr.Spec.Role.Namespace, err))
	}
	var problems []string
	for _, p := range r.opts.ceiling().PodSecurity(access.Rules(kr.Spec.Role.Rules), kr.Spec.Role.Namespace, ns.Labels[operatorv1alpha1.PodSecurityEnforceLabel]) {
		problems = append(problems, "role "+p)
	}
	if len(problems) > 0 {
		s.done = true
		return reconcile.Result{}, r.deny(ctx, kr, operatorv1alpha1.ReasonDenied, fmt.Sprintf("denied: %s", strings.Join(problems, "; ")))
	}
	return reconcile.Result{}, nil
}

// recordGrant records, and stores, status.grantedIn before anything is written in the
// target: whatever happens next (the manager killed mid-way, the status write at the end
// failing), what the request holds in that cluster can be found and withdrawn. Set only
// in memory, a request deleted after such a failure went at once (nothing recorded,
// nothing to clean up) and left its ServiceAccount, roles, bindings and token bindings in
// the target. A request the admission policy trustplane-kubeconfig-requests recorded at
// creation for this Cluster is recorded already: set in memory, status.grantedIn is
// stored with whatever status this reconcile ends with, and the record stands until then.
func (r *Reconciler) recordGrant(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr, key := s.kr, s.key
	if g := kr.Status.GrantedIn; g == nil || g.Key() != key {
		recorded, ok := kr.RecordedCluster()
		kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: key.Namespace, Name: key.Name}
		if !ok || recorded != key {
			if err := s.patcher.Patch(ctx, r.Client); err != nil {
				return reconcile.Result{}, fmt.Errorf("recording status.grantedIn before granting in Cluster %s: %w", key, err)
			}
		}
	}
	return reconcile.Result{}, nil
}

// grantPhase grants in the target what the spec asks for. A published kubeconfig issued
// for where the target no longer is (its server, CA bundle or TLS server name changed: a
// brought-along Cluster's kubeconfig Secret was edited, say after the API server moved to
// another port) is reissued by the issue phase, once the request is read as stored.
func (r *Reconciler) grantPhase(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr, target := s.kr, s.target
	s.moved = movedFrom(kr, target)
	if s.moved != "" {
		// The cache may not have the status of the reconcile that already issued for the
		// new endpoint: issuing again would only spend a token. The cache catches up
		// within moments (a status change is no event this controller is sent).
		if current, err := r.isCurrent(ctx, kr); err != nil || !current {
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, stale(kr, target, s.moved, err)
		}
	}
	if err := r.grant(ctx, kr, target, s.held != nil && !s.firstSpec); errors.Is(err, clustertarget.ErrPreparing) {
		// Another worker prepares the target now: the request is woken when it is done
		// (ensureNamespace), the status as it is.
		return reconcile.Result{RequeueAfter: r.slots.Requeue()}, nil
	} else if err != nil {
		return reconcile.Result{}, stale(kr, target, s.moved, targetUnreachable(target, err))
	}
	return reconcile.Result{}, nil
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
	if err := r.ensureNamespace(ctx, target, kr); err != nil {
		return err
	}
	if held && mayHoldAnOldSpec(kr) {
		keepRoleIn := ""
		if kr.Spec.Role != nil {
			keepRoleIn = kr.Spec.Role.Namespace
		}
		if err := deleteRBAC(ctx, target.Client, access.TargetName(kr), keepRoleIn, kr.Spec.ClusterRole != nil); err != nil {
			return err
		}
	}
	// The objects do not depend on each other (a binding may name a role that is not there
	// yet), so they are applied at once.
	var g errgroup.Group
	for _, obj := range access.Grants(kr, target.UID) {
		g.Go(func() error { return createOrApply(ctx, target.Client, obj, kr.Status.IssuedAt == nil) })
	}
	return g.Wait()
}

// deleteRBAC deletes the request's Roles and RoleBindings in every namespace but
// keepRoleIn, and its ClusterRoles and ClusterRoleBindings unless keepClusterRole, found by
// label: whatever namespace an earlier spec named, its grants are found.
func deleteRBAC(ctx context.Context, c client.Client, name, keepRoleIn string, keepClusterRole bool) error {
	return deleteRBACSelected(ctx, c, client.MatchingLabels{RequestLabel: name}, keepRoleIn, keepClusterRole)
}

// mayHoldAnOldSpec says whether what the request holds may be what an earlier spec asked
// for: unless Ready=True for this generation says its grants are exactly this spec.
// observedGeneration alone does not: it also advances for a generation judged Stalled or
// not ready by request (revoked), whose grants may be half done or none.
func mayHoldAnOldSpec(kr *operatorv1alpha1.KubeconfigRequest) bool {
	return !status.IsReadyForGeneration(kr)
}

// ensureNamespace applies TargetNamespace in the target, once per connection (again after
// a failure). A request that finds another reconcile preparing the target is woken when
// that ends.
func (r *Reconciler) ensureNamespace(ctx context.Context, t *clustertarget.Target, kr *operatorv1alpha1.KubeconfigRequest) error {
	var wake func()
	if r.slots.Wake != nil {
		wake = func() { r.slots.Wake(kr.Namespace, kr.Name) }
	}
	return t.Prepare(func() error {
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: TargetNamespace}}
		return status.WriteFailed("apply", ns, apply.Apply(ctx, t.Client, ns, FieldOwner))
	}, wake)
}

// createOrApply applies obj; for a request never issued before it first tries a plain
// create, which costs the API server about half of an apply that creates, and falls back
// to the apply when the object is already there.
func createOrApply(ctx context.Context, c client.Client, obj client.Object, fresh bool) error {
	if fresh {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner))
		if !apierrors.IsAlreadyExists(err) {
			return status.WriteFailed("create", obj, err)
		}
	}
	return status.WriteFailed("apply", obj, apply.Apply(ctx, c, obj, FieldOwner))
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

// stale reports err, the failure to issue a kubeconfig for where the target now is, as
// not Ready whatever generation was: the published kubeconfig is for where the target was
// (it may still work, e.g. with a CA bundle that still verifies the server, so it stays).
func stale(kr *operatorv1alpha1.KubeconfigRequest, target *clustertarget.Target, moved string, err error) error {
	if moved == "" || err == nil {
		return err
	}
	status.Set(kr, conditions.Ready, metav1.ConditionFalse, operatorv1alpha1.ReasonTargetChanged, "")
	return fmt.Errorf("cluster %s: %s since the published kubeconfig was issued; issuing a new one: %w", target.Name, moved, err)
}

// targetUnreachable reports a failed call to the target cluster, retried with backoff
// (unless the target refuses it for good: RBAC, policy, quota there).
func targetUnreachable(target *clustertarget.Target, err error) error {
	if down := (*clustertarget.DownError)(nil); errors.As(err, &down) {
		// Found unreachable moments ago: come back when it is tried again, with no backoff
		// grown by failures that tried nothing.
		return status.Waiting(operatorv1alpha1.ReasonTargetUnreachable, "cluster %s: %v", target.Name, target.Redact(down.Err)).After(down.RetryIn)
	}
	target.Unreachable(err) // found unreachable: the next reconciles fail at once for a while
	// A brought-along cluster's server is the tenant's choice (maybe an internal URL):
	// only the class of the failure and the host reach the status.
	return status.Transient(operatorv1alpha1.ReasonTargetUnreachable, fmt.Errorf("cluster %s: %w", target.Name, target.Redact(err)))
}
