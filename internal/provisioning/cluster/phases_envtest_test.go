package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

// env is the suite's one API server: the management cluster, the garden (with the Shoot
// CRD, behind gardenstandin's front for shoots/adminkubeconfig) and every Cluster's
// cluster at once.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

const projectNamespace = "garden-phases"

// phaseHarness is a reconciler with a fake clock and a garden over the suite's API server.
type phaseHarness struct {
	r         *Reconciler
	clock     *testingclock.FakeClock
	namespace string
}

func newPhaseHarness(t *testing.T) *phaseHarness {
	t.Helper()
	ctx := context.Background()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "..", "test", "provisioning", "cluster", "testdata", "shoots.yaml")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: projectNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	user, err := env.Environment().AddUser(envtest.User{Name: "gardener-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adminKubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	front, err := gardenstandin.NewFront(env.Config, env.Client, adminKubeconfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	h := &phaseHarness{clock: testingclock.NewFakeClock(time.Now().Truncate(time.Second)), namespace: env.Namespace(t, "phases")}
	params := shoot.DefaultParams()
	params.Namespace = projectNamespace
	opts := DefaultOptions()
	opts.Clock = h.clock
	env.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(ctx, mgr); err != nil {
			return err
		}
		g, err := garden.New(mgr, front.Config(), params, 10*time.Minute)
		if err != nil {
			return err
		}
		opts.Garden = g
		h.r = &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: events.NewFakeRecorder(100), Garden: g, Options: opts,
			targets: &clustertarget.Connections{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Garden: g, Policy: opts.Kubeconfig, Clock: h.clock}}
		return nil
	})
	return h
}

// cluster creates a Gardener Cluster (change may make it brought along) and waits until
// the manager's cache has it.
func (h *phaseHarness) cluster(t *testing.T, name string, change func(*operatorv1alpha1.Cluster)) *operatorv1alpha1.Cluster {
	t.Helper()
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{
			Core: operatorv1alpha1.ClusterCore{Region: "eu-central-1"},
			OIDCConfig: &operatorv1alpha1.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
				UsernameClaim: "email", UsernamePrefix: "-", SigningAlgs: []string{"RS256"}},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{MachineType: "m5.2xlarge", AutoScalerMin: 3, AutoScalerMax: 5, Provider: "aws", NumberOfZones: 3},
			Administrators: []string{"user.id@example.com"}}}
	if change != nil {
		change(c)
	}
	h.create(t, c)
	h.cached(t, c)
	return c
}

// broughtAlong creates a Cluster brought along with the suite's API server as its cluster.
func (h *phaseHarness) broughtAlong(t *testing.T, name string) *operatorv1alpha1.Cluster {
	t.Helper()
	h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name + "-admin"}, Data: map[string][]byte{"kubeconfig": env.Environment().KubeConfig}})
	return h.cluster(t, name, func(c *operatorv1alpha1.Cluster) {
		c.Spec = operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: name + "-admin"}, Administrators: []string{"user.id@example.com"}}
	})
}

func (h *phaseHarness) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// cached waits until the manager's cache has obj as stored.
func (h *phaseHarness) cached(t *testing.T, obj client.Object) {
	t.Helper()
	want := obj.GetResourceVersion()
	got := obj.DeepCopyObject().(client.Object)
	testenv.Eventually(t, "the cache to have "+obj.GetName(), 10*time.Second, func() bool {
		return h.r.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got) == nil && got.GetResourceVersion() == want
	})
}

// gardenerScope is the scope of a Gardener Cluster whose credential is granted (the
// subscription phase done): a SubscriptionRequest with a credential.
func (h *phaseHarness) gardenerScope(t *testing.T, name string) *scope {
	t.Helper()
	c := h.cluster(t, name, nil)
	sr := &cp.SubscriptionRequest{}
	sr.Status.GardenerSecretName = "aws-credential"
	return &scope{c: c, sr: sr}
}

// desired runs the phases up to the Shoot's apply.
func (h *phaseHarness) desired(t *testing.T, s *scope) *scope {
	t.Helper()
	for _, p := range []func(context.Context, *scope) error{h.r.desireShoot, h.r.applyAuthentication} {
		if err := p(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func condition(c *operatorv1alpha1.Cluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, t)
}

func (h *phaseHarness) gone(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err) || obj.GetDeletionTimestamp() != nil
}

// TestEveryPhase runs each phase of the Cluster controller's phase lists (provisioning
// through Gardener, brought along, deprovisioning) against the real API server with a
// fake clock and checks its effect; a failure names the list and the phase (t.Run). A
// phase without a case here fails.
func TestEveryPhase(t *testing.T) {
	ctx := context.Background()
	h := newPhaseHarness(t)
	type phaseCase struct {
		setup func(t *testing.T) *scope
		check func(t *testing.T, s *scope, err error)
	}
	wantReason := func(t *testing.T, err error, reason string) {
		t.Helper()
		if status.Reason(err) != reason {
			t.Errorf("error %v (reason %q), want reason %s", err, status.Reason(err), reason)
		}
	}
	cases := map[string]phaseCase{
		"spec": {
			setup: func(t *testing.T) *scope {
				return &scope{c: h.cluster(t, "spec", func(c *operatorv1alpha1.Cluster) { c.Spec.Infrastructure.Provider = "nowhere" })}
			},
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonInvalidSpec)
				if p := condition(s.c, operatorv1alpha1.ConditionClusterProvisioned); p == nil || p.Status != metav1.ConditionFalse || p.Reason != operatorv1alpha1.ReasonInvalidSpec {
					t.Errorf("ClusterProvisioned %+v", p)
				}
				if err := h.r.checkSpec(ctx, &scope{c: h.cluster(t, "spec-valid", nil)}); err != nil {
					t.Errorf("a valid spec: %v", err)
				}
			},
		},
		"subscription": {
			setup: func(t *testing.T) *scope { return &scope{c: h.cluster(t, "subscription", nil)} },
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonWaitingForSubscription)
				sr := &cp.SubscriptionRequest{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s.c), sr); err != nil || !metav1.IsControlledBy(sr, s.c) || sr.Spec.Provider != "aws" || sr.Spec.Region != "eu-central-1" {
					t.Fatalf("SubscriptionRequest %+v (%v): not applied for the Cluster", sr, err)
				}
				// Granted: the phase goes on with the credential.
				sr.Status.GardenerSecretName = "aws-credential"
				sr.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: "Assigned", LastTransitionTime: metav1.Now()}}
				if err := env.Client.Status().Update(ctx, sr); err != nil {
					t.Fatal(err)
				}
				if err := h.r.subscription(ctx, s); err != nil || s.sr.Status.GardenerSecretName != "aws-credential" {
					t.Errorf("with a credential: %v, scope's SubscriptionRequest %+v", err, s.sr.Status)
				}
			},
		},
		"shoot-desired": {
			setup: func(t *testing.T) *scope { return h.gardenerScope(t, "shoot-desired") },
			check: func(t *testing.T, s *scope, err error) {
				if err != nil || s.desired == nil || s.desired.GetName() != h.r.Garden.Params.NameOf(s.c) || s.desired.GetLabels()[operatorv1alpha1.ClusterNameLabel] != s.c.Name {
					t.Errorf("error %v, desired %v", err, s.desired)
				}
			},
		},
		"authentication": {
			setup: func(t *testing.T) *scope {
				s := h.gardenerScope(t, "authentication")
				if err := h.r.desireShoot(ctx, s); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				cm := &corev1.ConfigMap{}
				if err != nil || s.auth == nil || s.auth.configMap == nil {
					t.Fatalf("error %v, authentication %+v", err, s.auth)
				}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace, Name: s.auth.configMap.Name}, cm); err != nil {
					t.Errorf("the authentication ConfigMap was not applied: %v", err)
				}
				if s.desired.GetAnnotations()[operatorv1alpha1.AuthenticationHashAnnotation] == "" {
					t.Error("the desired Shoot does not carry the authentication hash")
				}
			},
		},
		"shoot": {
			setup: func(t *testing.T) *scope { return h.desired(t, h.gardenerScope(t, "shoot")) },
			check: func(t *testing.T, s *scope, err error) {
				live := garden.NewShoot()
				if err != nil {
					t.Fatal(err)
				}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace, Name: s.desired.GetName()}, live); err != nil {
					t.Fatalf("the Shoot was not applied: %v", err)
				}
				if live.GetAnnotations()[operatorv1alpha1.DesiredHashAnnotation] == "" || live.GetLabels()[operatorv1alpha1.ClusterNamespaceLabel] != s.c.Namespace {
					t.Errorf("Shoot metadata %v %v", live.GetAnnotations(), live.GetLabels())
				}
			},
		},
		"authentication-cleanup": {
			setup: func(t *testing.T) *scope {
				s := h.desired(t, h.gardenerScope(t, "authentication-cleanup"))
				if err := h.r.applyShoot(ctx, s); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				cm := &corev1.ConfigMap{}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: projectNamespace, Name: s.auth.configMap.Name}, cm); err != nil {
					t.Fatal(err)
				}
				if err != nil || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != s.desired.GetUID() {
					t.Errorf("error %v, owners %+v: the ConfigMap written for a new Shoot is not the Shoot's", err, cm.OwnerReferences)
				}
			},
		},
		"provisioned": {
			setup: func(t *testing.T) *scope {
				s := h.gardenerScope(t, "provisioned")
				s.desired = garden.NewShoot()
				s.desired.SetName(h.r.Garden.Params.NameOf(s.c))
				setLastOperation(t, s.desired, "Processing", 30)
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonProvisioning)
				setLastOperation(t, s.desired, "Succeeded", 100)
				if err := h.r.followShoot(ctx, s); err != nil || s.done || s.c.Status.ShootName != s.desired.GetName() {
					t.Errorf("succeeded: %v, done %v, status.shootName %q", err, s.done, s.c.Status.ShootName)
				}
				if p := condition(s.c, operatorv1alpha1.ConditionClusterProvisioned); p == nil || p.Status != metav1.ConditionTrue {
					t.Errorf("ClusterProvisioned %+v", p)
				}
				// Bound for this generation already: nothing more to do.
				status.MarkReady(s.c, operatorv1alpha1.ReasonAdministratorsBound, "")
				if err := h.r.followShoot(ctx, s); err != nil || !s.done {
					t.Errorf("bound already: %v, done %v", err, s.done)
				}
			},
		},
		"admin-access": {
			setup: func(t *testing.T) *scope {
				s := h.desired(t, h.gardenerScope(t, "admin-access"))
				if err := h.r.applyShoot(ctx, s); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				if err != nil || s.admin == nil || h.r.targets.Dials(s.c.UID) != 1 {
					t.Fatalf("error %v, admin %v, %d dials", err, s.admin, h.r.targets.Dials(s.c.UID))
				}
				// Reused for half the admin kubeconfig's lifetime (10 minutes), by the clock.
				h.clock.Step(4 * time.Minute)
				if err := h.r.adminAccess(ctx, s); err != nil || h.r.targets.Dials(s.c.UID) != 1 {
					t.Errorf("4 minutes later: %v, %d dials, want the connection reused", err, h.r.targets.Dials(s.c.UID))
				}
				h.clock.Step(2 * time.Minute)
				if err := h.r.adminAccess(ctx, s); err != nil || h.r.targets.Dials(s.c.UID) != 2 {
					t.Errorf("6 minutes later: %v, %d dials, want a fresh admin kubeconfig", err, h.r.targets.Dials(s.c.UID))
				}
			},
		},
		"kubeconfig": {
			setup: func(t *testing.T) *scope { return &scope{c: h.broughtAlong(t, "kubeconfig")} },
			check: func(t *testing.T, s *scope, err error) {
				if p := condition(s.c, operatorv1alpha1.ConditionClusterProvisioned); err != nil || s.admin == nil || p == nil || p.Reason != operatorv1alpha1.ReasonBroughtAlong {
					t.Errorf("error %v, admin %v, ClusterProvisioned %+v", err, s.admin, p)
				}
				missing := h.cluster(t, "kubeconfig-missing", func(c *operatorv1alpha1.Cluster) {
					c.Spec = operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "none"}}
				})
				wantReason(t, h.r.broughtAlong(ctx, &scope{c: missing}), operatorv1alpha1.ReasonKubeconfigMissing)
			},
		},
		"administrators": {
			setup: func(t *testing.T) *scope {
				s := &scope{c: h.broughtAlong(t, "administrators")}
				if err := h.r.broughtAlong(ctx, s); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				list := &rbacv1.ClusterRoleBindingList{}
				if err := env.Client.List(ctx, list, client.MatchingLabels{operatorv1alpha1.AdministratorLabel: access.AdministratorsOf(s.c.Namespace, s.c.Name)}); err != nil {
					t.Fatal(err)
				}
				if ready := condition(s.c, conditions.Ready); err != nil || len(list.Items) != 1 || ready == nil || ready.Reason != operatorv1alpha1.ReasonAdministratorsBound {
					t.Errorf("error %v, %d bindings, Ready %+v", err, len(list.Items), ready)
				}
			},
		},
		"wait-for-requests": {
			setup: func(t *testing.T) *scope {
				c := h.broughtAlong(t, "wait-for-requests")
				// A request of a namespace the Cluster does not grant whose status says its
				// grants live there: waited for until --cluster-deletion-cleanup-timeout.
				other := env.Namespace(t, "claiming")
				kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "claiming"},
					Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: c.Name, ClusterNamespace: c.Namespace, Expiration: 3600,
						ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}}}
				h.create(t, kr)
				kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: c.Namespace, Name: c.Name}
				if err := env.Client.Status().Update(ctx, kr); err != nil {
					t.Fatal(err)
				}
				h.cached(t, kr)
				c.DeletionTimestamp = &metav1.Time{Time: h.clock.Now().Add(-time.Minute)}
				return &scope{c: c}
			},
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonInUse)
				result, _ := status.Result(ctrl.Result{}, err)
				if want := h.r.Options.DeletionCleanupTimeout - time.Minute; result.RequeueAfter != want {
					t.Errorf("requeue after %v, want %v (the deadline by the clock)", result.RequeueAfter, want)
				}
				h.clock.Step(h.r.Options.DeletionCleanupTimeout)
				if err := h.r.waitForRequests(ctx, s); err != nil {
					t.Errorf("past the deadline: %v, want the deletion to go on", err)
				}
			},
		},
		"unbind": {
			setup: func(t *testing.T) *scope {
				s := &scope{c: h.broughtAlong(t, "unbind")}
				if err := run(ctx, h.r.phasesFor(s.c), s); err != nil {
					t.Fatal(err)
				}
				s.c.DeletionTimestamp = &metav1.Time{Time: h.clock.Now()}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				list := &rbacv1.ClusterRoleBindingList{}
				if err := env.Client.List(ctx, list, client.MatchingLabels{operatorv1alpha1.AdministratorLabel: access.AdministratorsOf(s.c.Namespace, s.c.Name)}); err != nil {
					t.Fatal(err)
				}
				if err != nil || len(list.Items) != 0 {
					t.Errorf("error %v, %d administrator bindings left", err, len(list.Items))
				}
			},
		},
		"delete-shoot": {
			setup: func(t *testing.T) *scope {
				s := h.desired(t, h.gardenerScope(t, "delete-shoot"))
				if err := h.r.applyShoot(ctx, s); err != nil {
					t.Fatal(err)
				}
				return &scope{c: s.c}
			},
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonDeprovisioning)
				live := garden.NewShoot()
				live.SetNamespace(projectNamespace)
				live.SetName(h.r.Garden.Params.NameOf(s.c))
				if !h.gone(t, live) {
					t.Error("the Shoot was not deleted")
				}
			},
		},
		"delete-authentication": {
			setup: func(t *testing.T) *scope {
				s := h.desired(t, h.gardenerScope(t, "delete-authentication"))
				if h.gone(t, s.auth.configMap.DeepCopy()) {
					t.Fatal("no authentication ConfigMap to start from")
				}
				return &scope{c: s.c}
			},
			check: func(t *testing.T, s *scope, err error) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: projectNamespace, Name: shoot.AuthenticationConfigMapName(h.r.Garden.Params.NameOf(s.c))}}
				if err != nil || !h.gone(t, cm) {
					t.Errorf("error %v: the authentication ConfigMap is still there", err)
				}
			},
		},
		"release-subscription": {
			setup: func(t *testing.T) *scope {
				s := &scope{c: h.cluster(t, "release-subscription", nil)}
				if _, err := h.r.applySubscription(ctx, s.c); err != nil {
					t.Fatal(err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				wantReason(t, err, operatorv1alpha1.ReasonDeprovisioning)
				if !h.gone(t, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: s.c.Namespace, Name: s.c.Name}}) {
					t.Error("the SubscriptionRequest was not deleted")
				}
				// A Cluster deleted right after its request was created: the cache has not
				// seen the request yet, and the deletion must not go on without it.
				unseen := h.cluster(t, "release-subscription-unseen", nil)
				if _, err := h.r.applySubscription(ctx, unseen); err != nil {
					t.Fatal(err)
				}
				lagging := &Reconciler{Client: cacheWithoutRequests{h.r.Client}, APIReader: h.r.APIReader, Recorder: h.r.Recorder}
				wantReason(t, lagging.releaseSubscription(ctx, &scope{c: unseen}), operatorv1alpha1.ReasonDeprovisioning)
				if !h.gone(t, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: unseen.Namespace, Name: unseen.Name}}) {
					t.Error("a SubscriptionRequest the cache had not seen was left behind")
				}
			},
		},
		"release": {
			setup: func(t *testing.T) *scope {
				s := &scope{c: h.broughtAlong(t, "release")}
				if err := Finalizer.Ensure(ctx, env.Client, s.c); err != nil {
					t.Fatal(err)
				}
				if err := h.r.broughtAlong(ctx, s); err != nil || !h.r.targets.Connected(s.c.UID) {
					t.Fatalf("no connection to start from: %v", err)
				}
				return s
			},
			check: func(t *testing.T, s *scope, err error) {
				stored := &operatorv1alpha1.Cluster{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s.c), stored); err != nil {
					t.Fatal(err)
				}
				if err != nil || Finalizer.Held(stored) || h.r.targets.Connected(s.c.UID) {
					t.Errorf("error %v, finalizer held %v, connection kept %v", err, Finalizer.Held(stored), h.r.targets.Connected(s.c.UID))
				}
			},
		},
	}
	lists := map[string][]phase{
		"gardener":                  h.r.phasesFor(&operatorv1alpha1.Cluster{}),
		"brought-along":             h.r.phasesFor(&operatorv1alpha1.Cluster{Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{}}}),
		"deprovision-gardener":      h.r.deprovisionPhases(&operatorv1alpha1.Cluster{}),
		"deprovision-brought-along": h.r.deprovisionPhases(&operatorv1alpha1.Cluster{Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{}}}),
	}
	tested := map[string]bool{}
	for _, list := range []string{"gardener", "brought-along", "deprovision-gardener", "deprovision-brought-along"} {
		for _, p := range lists[list] {
			if tested[p.name] {
				continue // the same phase in another list
			}
			tested[p.name] = true
			t.Run(list+"/"+p.name, func(t *testing.T) {
				tc, ok := cases[p.name]
				if !ok {
					t.Fatalf("phase %s: no test", p.name)
				}
				s := tc.setup(t)
				tc.check(t, s, p.run(ctx, s))
			})
		}
	}
	for name := range cases {
		if !tested[name] {
			t.Errorf("phase %s: tested, but in no phase list", name)
		}
	}
}

func setLastOperation(t *testing.T, s *unstructured.Unstructured, state string, progress int64) {
	t.Helper()
	if err := unstructured.SetNestedMap(s.Object, map[string]any{"type": "Create", "state": state, "progress": progress}, "status", "lastOperation"); err != nil {
		t.Fatal(err)
	}
}

// cacheWithoutRequests is a cache that has not yet seen any SubscriptionRequest: one
// the controller has just created, and the watch has not yet delivered.
type cacheWithoutRequests struct{ client.Client }

func (c cacheWithoutRequests) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*cp.SubscriptionRequest); ok {
		return apierrors.NewNotFound(cp.GroupVersion.WithResource("subscriptionrequests").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
