package kubeconfig

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/status"
)

// phaseCase tests one phase of the reconcile: setup makes the objects and the scope the
// phase starts from, check asserts what the phase did.
type phaseCase struct {
	setup func(t *testing.T, h *phaseHarness) *scope
	check func(t *testing.T, h *phaseHarness, s *scope, result reconcile.Result, err error)
}

// phaseHarness is a reconciler with a fake clock over the suite's API server, which is
// also the target cluster (brought along as Cluster <namespace>/target).
type phaseHarness struct {
	r         *Reconciler
	clock     *testingclock.FakeClock
	namespace string
	cluster   *operatorv1alpha1.Cluster
}

func newPhaseHarness(t *testing.T) *phaseHarness {
	t.Helper()
	ctx := context.Background()
	h := &phaseHarness{clock: testingclock.NewFakeClock(time.Now().Truncate(time.Second)), namespace: env.Namespace(t, "phases")}
	opts := DefaultOptions()
	opts.Clock = h.clock
	h.r = &Reconciler{Client: env.Client, APIReader: env.Client, Recorder: events.NewFakeRecorder(100), opts: opts,
		targets: &clustertarget.Connections{Client: env.Client, APIReader: env.Client, Policy: opts.Kubeconfig, Clock: h.clock}}
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "target-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}}
	h.cluster = &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "target"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: admin.Name}}}
	for _, obj := range []client.Object{admin, h.cluster} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// request creates a request for the harness's Cluster (spec as given, rules granting
// get on pods in the namespace unless set) and reads it back as stored.
func (h *phaseHarness) request(t *testing.T, name string, change func(*operatorv1alpha1.KubeconfigRequest)) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: h.cluster.Name, Expiration: 3600,
			Role: &operatorv1alpha1.RoleSpec{Namespace: h.namespace, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	if change != nil {
		change(kr)
	}
	if err := env.Client.Create(context.Background(), kr); err != nil {
		t.Fatal(err)
	}
	return kr
}

// scopeOf is the scope a phase after "cluster" and "connect" starts from.
func (h *phaseHarness) scopeOf(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest, connect bool) *scope {
	t.Helper()
	kr.Status.TargetName = access.TargetName(kr) // as the record phase does
	s := &scope{kr: kr, patcher: status.NewPatcher(kr), now: h.clock.Now(), key: kr.ClusterKey(), cluster: h.cluster, held: grantedIn(kr)}
	if connect {
		target, err := h.r.targets.Get(context.Background(), s.key)
		if err != nil {
			t.Fatal(err)
		}
		s.target = target
	}
	return s
}

// publish makes the Secret a request publishes its kubeconfig in, and says so in its
// status, as an earlier issue would have.
func (h *phaseHarness) publish(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kr.Namespace, Name: secretName(kr),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kr, operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))}},
		Data: map[string][]byte{"kubeconfig": []byte("issued before")}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	kr.Status.Kubeconfig, kr.Status.SecretName = "aXNzdWVkIGJlZm9yZQ==", secret.Name
}

func (h *phaseHarness) gone(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err) || obj.GetDeletionTimestamp() != nil
}

// wantStopped: the phase ended the reconcile with a Stalled error of reason.
func wantStopped(t *testing.T, s *scope, err error, reason string) {
	t.Helper()
	if err == nil || status.Reason(err) != reason || !s.done {
		t.Errorf("error %v (reason %q), done %v; want reason %s and the reconcile ended", err, status.Reason(err), s.done, reason)
	}
}

// TestEveryPhase runs each phase of the reconcile (Reconciler.phases) against the real
// API server, with a fake clock, and checks its effect. A phase without a case here fails.
func TestEveryPhase(t *testing.T) {
	ctx := context.Background()
	h := newPhaseHarness(t)
	cases := map[string]phaseCase{
		"record": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "record", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Annotations = map[string]string{operatorv1alpha1.ClusterAtCreationAnnotation: h.namespace + "/" + h.cluster.Name}
				})
				return &scope{kr: kr}
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				if err != nil || s.kr.Status.TargetName != access.NewTargetName(s.kr) || !s.firstSpec {
					t.Errorf("error %v, status.targetName %q (want %q), first spec %v", err, s.kr.Status.TargetName, access.NewTargetName(s.kr), s.firstSpec)
				}
				if g := s.kr.Status.GrantedIn; g == nil || g.Name != h.cluster.Name {
					t.Errorf("status.grantedIn %v: admission's record is not carried into the status", g)
				}
			},
		},
		"ceiling": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "ceiling", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Spec.ClusterRole = &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}}}
				})
				h.publish(t, kr)
				return &scope{kr: kr}
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				wantStopped(t, s, err, operatorv1alpha1.ReasonDenied)
				if published := (&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.kr.Namespace, Name: secretName(s.kr)}}); !h.gone(t, published) || s.kr.Status.Kubeconfig != "" {
					t.Error("a denied request keeps its published kubeconfig")
				}
			},
		},
		"expiration": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				return &scope{kr: h.request(t, "expiration", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Expiration = 60 * 24 * 3600 })}
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				wantStopped(t, s, err, operatorv1alpha1.ReasonExpirationTooLong)
			},
		},
		"revoke": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "revoke", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Annotations = map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}
				})
				h.publish(t, kr)
				return &scope{kr: kr}
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, _ reconcile.Result, err error) {
				ready := meta.FindStatusCondition(s.kr.Status.Conditions, conditions.Ready)
				if err != nil || !s.done || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != operatorv1alpha1.ReasonRevoked {
					t.Errorf("error %v, done %v, Ready %+v; want Revoked and the reconcile ended", err, s.done, ready)
				}
				if published := (&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.kr.Namespace, Name: secretName(s.kr)}}); !h.gone(t, published) || s.kr.Status.Kubeconfig != "" {
					t.Error("a revoked request keeps its published kubeconfig")
				}
			},
		},
		"cluster": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				// A Cluster of another namespace that does not grant this one.
				other := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-granting-" + h.namespace},
					Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "none"}}}
				if err := env.Client.Create(ctx, other); err != nil {
					t.Fatal(err)
				}
				return &scope{kr: h.request(t, "cluster", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Spec.Cluster, kr.Spec.ClusterNamespace = other.Name, other.Namespace
				})}
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				wantStopped(t, s, err, operatorv1alpha1.ReasonDenied)
				if s.cluster == nil || s.key != s.kr.ClusterKey() {
					t.Errorf("cluster %v at %v: the Cluster was not read", s.cluster, s.key)
				}
			},
		},
		"withdraw-previous": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "moved-away", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Cluster = "elsewhere" })
				// Its grants live in Cluster "target", the spec names another now.
				kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: h.namespace, Name: h.cluster.Name}
				if err := env.Client.Status().Update(ctx, kr); err != nil {
					t.Fatal(err)
				}
				sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: TargetNamespace, Name: access.TargetName(kr), Labels: access.RequestLabels(kr, h.cluster.UID)}}
				ensureTargetNamespace(t)
				if err := env.Client.Create(ctx, sa); err != nil {
					t.Fatal(err)
				}
				s := &scope{kr: kr, key: kr.ClusterKey(), held: grantedIn(kr)}
				return s
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, result reconcile.Result, err error) {
				if err != nil || !result.IsZero() || s.held != nil || s.kr.Status.GrantedIn != nil {
					t.Errorf("error %v, result %+v, held %v, status.grantedIn %v; want the previous Cluster withdrawn from", err, result, s.held, s.kr.Status.GrantedIn)
				}
				if sa := (&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: TargetNamespace, Name: access.TargetName(s.kr)}}); !h.gone(t, sa) {
					t.Error("the ServiceAccount granted in the previous Cluster is still there")
				}
			},
		},
		"connect": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "connect", nil)
				return &scope{kr: kr, key: kr.ClusterKey(), cluster: h.cluster}
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, _ reconcile.Result, err error) {
				if err != nil || s.target == nil || s.target.UID != h.cluster.UID || !h.r.targets.Connected(h.cluster.UID) {
					t.Fatalf("error %v, target %v: not connected to the Cluster's cluster", err, s.target)
				}
				// A Cluster that does not exist is waited for.
				gone := &scope{kr: s.kr, key: types.NamespacedName{Namespace: h.namespace, Name: "gone"}}
				if _, err := h.r.connect(ctx, gone); status.Reason(err) != operatorv1alpha1.ReasonClusterNotReady {
					t.Errorf("a missing Cluster: %v, want waiting with ClusterNotReady", err)
				}
			},
		},
		"pod-security": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				// Workloads may be written only where Pod Security baseline or restricted is enforced.
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "privileged-", Labels: map[string]string{operatorv1alpha1.PodSecurityEnforceLabel: "privileged"}}}
				if err := env.Client.Create(ctx, ns); err != nil {
					t.Fatal(err)
				}
				kr := h.request(t, "pod-security", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Spec.Role = &operatorv1alpha1.RoleSpec{Namespace: ns.Name, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}}
				})
				return h.scopeOf(t, kr, true)
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				wantStopped(t, s, err, operatorv1alpha1.ReasonDenied)
			},
		},
		"record-grant": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				return h.scopeOf(t, h.request(t, "record-grant", nil), true)
			},
			check: func(t *testing.T, _ *phaseHarness, s *scope, _ reconcile.Result, err error) {
				stored := &operatorv1alpha1.KubeconfigRequest{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s.kr), stored); err != nil {
					t.Fatal(err)
				}
				if err != nil || stored.Status.GrantedIn == nil || stored.Status.GrantedIn.Key() != s.key {
					t.Errorf("error %v, stored status.grantedIn %v: not stored before granting in %v", err, stored.Status.GrantedIn, s.key)
				}
			},
		},
		"grant": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "grant", func(kr *operatorv1alpha1.KubeconfigRequest) {
					kr.Spec.ClusterRole = &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}
				})
				return h.scopeOf(t, kr, true)
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, result reconcile.Result, err error) {
				if err != nil || !result.IsZero() {
					t.Fatalf("error %v, result %+v", err, result)
				}
				name := access.TargetName(s.kr)
				for _, obj := range []client.Object{
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: TargetNamespace, Name: name}},
					&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name}},
					&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name}},
					&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}},
					&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
				} {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
						t.Errorf("%T %s: %v", obj, name, err)
					} else if obj.GetLabels()[operatorv1alpha1.KubeconfigClusterUIDLabel] != string(h.cluster.UID) {
						t.Errorf("%T %s labelled %v", obj, name, obj.GetLabels())
					}
				}
			},
		},
		"revoke-credential": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "revoke-credential", nil)
				s := h.scopeOf(t, kr, true)
				if err := h.r.grant(ctx, kr, s.target, false); err != nil {
					t.Fatal(err)
				}
				if _, err := h.r.issuePhase(ctx, s); err != nil || len(kr.Status.Credentials) != 1 {
					t.Fatalf("issuing: %v, credentials %+v", err, kr.Status.Credentials)
				}
				kr.Annotations = map[string]string{operatorv1alpha1.RevokeCredentialAnnotation: kr.Status.Credentials[0].ID}
				return s
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, result reconcile.Result, err error) {
				kr, id := s.kr, s.kr.Annotations[operatorv1alpha1.RevokeCredentialAnnotation]
				if err != nil || !result.IsZero() || len(kr.Status.Credentials) != 0 || kr.Status.LastHandledRevokeCredential != id || len(bindingsOf(t, kr)) != 0 {
					t.Fatalf("error %v, result %+v, credentials %+v, handled %q, %d bindings: the current credential %s not revoked",
						err, result, kr.Status.Credentials, kr.Status.LastHandledRevokeCredential, len(bindingsOf(t, kr)), id)
				}
				// The issue phase issues a new one at once.
				if _, err := h.r.issuePhase(ctx, s); err != nil || len(kr.Status.Credentials) != 1 || kr.Status.Credentials[0].ID == id || len(bindingsOf(t, kr)) != 1 {
					t.Errorf("after the revoke: error %v, credentials %+v, %d bindings", err, kr.Status.Credentials, len(bindingsOf(t, kr)))
				}
				// Handled: the annotation left in place revokes nothing more.
				if _, err := h.r.revokeCredentialIfAsked(ctx, s); err != nil || len(kr.Status.Credentials) != 1 {
					t.Errorf("the handled annotation again: error %v, credentials %+v", err, kr.Status.Credentials)
				}
			},
		},
		"issue": {
			setup: func(t *testing.T, h *phaseHarness) *scope {
				kr := h.request(t, "issue", nil)
				s := h.scopeOf(t, kr, true)
				if err := h.r.grant(ctx, kr, s.target, false); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, h *phaseHarness, s *scope, result reconcile.Result, err error) {
				kr, now := s.kr, h.clock.Now() // whole seconds: the harness's clock starts so
				if err != nil || kr.Status.Kubeconfig == "" || !kr.Status.IssuedAt.Equal(&metav1.Time{Time: now}) {
					t.Fatalf("error %v, issued at %v (now %v): no kubeconfig issued", err, kr.Status.IssuedAt, now)
				}
				if ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready); ready == nil || ready.Reason != operatorv1alpha1.ReasonIssued {
					t.Errorf("Ready %+v, want Issued", ready)
				}
				// Back when the rotation is due: RotateFraction into the lifetime, from the clock.
				life := kr.Status.ExpirationTimestamp.Sub(now)
				if want := time.Duration(float64(life) * h.r.opts.RotateFraction); result.RequeueAfter != want {
					t.Errorf("requeue after %v, want %v (%v of a lifetime of %v)", result.RequeueAfter, want, h.r.opts.RotateFraction, life)
				}
				bindingsNow := bindingsOf(t, kr)
				if len(bindingsNow) != 1 || bindingsNow[0].Annotations[operatorv1alpha1.KubeconfigExpiresAnnotation] != now.Add(time.Hour).UTC().Format(time.RFC3339) {
					t.Fatalf("token bindings %v, want one expiring an hour after the fake clock's now", bindingsNow)
				}
				// Not due yet: nothing issued, back at the same time.
				h.clock.Step(time.Minute)
				s.now = h.clock.Now()
				again, err := h.r.issuePhase(ctx, s)
				if want := result.RequeueAfter - time.Minute; err != nil || again.RequeueAfter != want || len(bindingsOf(t, kr)) != 1 {
					t.Errorf("a minute later: error %v, requeue after %v (want %v), %d bindings (want 1)", err, again.RequeueAfter, want, len(bindingsOf(t, kr)))
				}
				// Due: a new credential, the one before kept until it expires.
				h.clock.Step(result.RequeueAfter)
				s.now = h.clock.Now()
				if _, err := h.r.issuePhase(ctx, s); err != nil || !kr.Status.IssuedAt.Equal(&metav1.Time{Time: h.clock.Now().Truncate(time.Second)}) || len(bindingsOf(t, kr)) != 2 {
					t.Errorf("rotation due: error %v, issued at %v (now %v), %d bindings (want 2)", err, kr.Status.IssuedAt, h.clock.Now(), len(bindingsOf(t, kr)))
				}
			},
		},
	}
	for _, p := range h.r.phases() {
		t.Run(p.name, func(t *testing.T) {
			tc, ok := cases[p.name]
			if !ok {
				t.Fatalf("phase %s: no test", p.name)
			}
			s := tc.setup(t, h)
			result, err := p.run(ctx, s)
			tc.check(t, h, s, result, err) // t.Run names the phase in every failure
		})
		delete(cases, p.name)
	}
	for name := range cases {
		t.Errorf("phase %s: tested, but not in the phase list", name)
	}
}

func ensureTargetNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TargetNamespace}}
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// bindingsOf are the token bindings of kr in the target.
func bindingsOf(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(TargetNamespace), client.MatchingLabels{RequestLabel: access.TargetName(kr)}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
