package kubeconfig_test

// Tests of what a KubeconfigRequest loses when it no longer asks for it: spec edits,
// a changed spec.cluster, a withdrawn cross-namespace grant, and revoke while the target
// cannot be reached. Every check is made against the target API server itself: by label
// for the objects, and with the issued token for the access.

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/testenv"
)

// held lists "Kind namespace/name" of every object in the target c labelled for the
// request ns/name, in every namespace.
func held(t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	var out []string
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.SecretList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := c.List(ctx, list, client.MatchingLabels{kubeconfigctrl.RequestNamespaceLabel: ns, kubeconfigctrl.RequestNameLabel: name}); err != nil {
			t.Fatal(err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(kindOfList(list), "List")
		for _, o := range objs {
			obj := o.(client.Object)
			out = append(out, kind+" "+obj.GetNamespace()+"/"+obj.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func kindOfList(v client.ObjectList) string {
	switch v.(type) {
	case *corev1.ServiceAccountList:
		return "ServiceAccountList"
	case *corev1.SecretList:
		return "SecretList"
	case *rbacv1.RoleList:
		return "RoleList"
	case *rbacv1.RoleBindingList:
		return "RoleBindingList"
	case *rbacv1.ClusterRoleList:
		return "ClusterRoleList"
	case *rbacv1.ClusterRoleBindingList:
		return "ClusterRoleBindingList"
	}
	return "?"
}

// waitHeld waits until the objects the request holds in the target, by kind and
// namespace ("Role team"), are exactly want (Secrets, the token bindings, are left out).
func waitHeld(t *testing.T, c client.Client, ns, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = got[:0]
		for _, o := range held(t, c, ns, name) {
			kind, key, _ := strings.Cut(o, " ")
			if kind == "Secret" {
				continue
			}
			namespace, _, _ := strings.Cut(key, "/")
			got = append(got, strings.TrimSpace(kind+" "+namespace))
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s holds %v in the target, want %v", ns, name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// update changes the request with change and writes it, retrying on conflicts.
func update(t *testing.T, ns, name string, change func(*operatorv1alpha1.KubeconfigRequest)) {
	t.Helper()
	for {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kr); err != nil {
			t.Fatal(err)
		}
		change(kr)
		err := mgmt.Client.Update(ctx, kr)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

// allowed says whether the kubeconfig's token may do what call does: false once the
// target answers Forbidden or Unauthorized; any other error fails the test.
func allowed(t *testing.T, call func() error) bool {
	t.Helper()
	err := call()
	if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Fatal(err)
	}
	return err == nil
}

// rejected waits until the target rejects the token of c as unauthenticated. The target
// caches a successful token authentication for 10 s, so this can take that long.
func rejected(t *testing.T, what string, c kubernetes.Interface) {
	t.Helper()
	testenv.Eventually(t, what+" to be rejected by the target", 20*time.Second, func() bool {
		_, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	})
}

// eventuallyGetsPods waits until c may get pods in team, failing with the target's last
// answer and what the request holds there.
func eventuallyGetsPods(t *testing.T, what string, c kubernetes.Interface) {
	t.Helper()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = c.CoreV1().Pods("team").Get(ctx, "none", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s may not get pods in team: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// canGetPods says whether c may get pods in team (what roleRequest grants): the target
// answers NotFound for a pod that is not there only to who may get pods.
func canGetPods(t *testing.T, c kubernetes.Interface) bool {
	t.Helper()
	return allowed(t, func() error {
		_, err := c.CoreV1().Pods("team").Get(ctx, "none", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func listPods(c kubernetes.Interface, ns string) func() error {
	return func() error { _, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err }
}

func listNamespaces(c kubernetes.Interface) func() error {
	return func() error { _, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); return err }
}

func podReader(ns string) *operatorv1alpha1.RoleSpec {
	return &operatorv1alpha1.RoleSpec{Namespace: ns, Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
}

func namespaceLister() *operatorv1alpha1.ClusterRoleSpec {
	return &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// TestSpecEditsWithdrawWhatTheOldSpecGranted: spec.role and spec.clusterRole stay
// mutable; each edit removes, by label and in every namespace, what the old spec granted,
// and the issued token loses that access at once.
func TestSpecEditsWithdrawWhatTheOldSpecGranted(t *testing.T) {
	setup(t)
	createNamespace(t, target.Client, "team-two")
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, Role: podReader("team"), ClusterRole: namespaceLister()}}
	createAll(t, kr)
	kr = waitConditions(t, ns, "editor", "Ready=True/Issued")
	if g := kr.Status.GrantedIn; g == nil || g.Namespace != ns || g.Name != "target" {
		t.Errorf("status.grantedIn %+v, want default/target", g)
	}
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role team", "RoleBinding team", "ClusterRole", "ClusterRoleBinding")
	// Every object made for the request says which one, uid included.
	sa := &corev1.ServiceAccountList{}
	if err := target.Client.List(ctx, sa, client.MatchingLabels{kubeconfigctrl.RequestUIDLabel: string(kr.UID)}); err != nil || len(sa.Items) != 1 {
		t.Fatalf("ServiceAccounts labelled with the request's uid: %d, %v", len(sa.Items), err)
	}
	kc := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig to list pods in team and namespaces", 10*time.Second, func() bool {
		return allowed(t, listPods(kc, "team")) && allowed(t, listNamespaces(kc))
	})

	// The Role moves to another namespace: the old Role and RoleBinding go.
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Role.Namespace = "team-two" })
	waitConditions(t, ns, "editor", "Ready=True/Issued")
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role team-two", "RoleBinding team-two", "ClusterRole", "ClusterRoleBinding")
	testenv.Eventually(t, "pods in team forbidden, in team-two allowed", 10*time.Second, func() bool {
		return !allowed(t, listPods(kc, "team")) && allowed(t, listPods(kc, "team-two"))
	})

	// clusterRole removed: the ClusterRole and its binding go.
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.ClusterRole = nil })
	waitConditions(t, ns, "editor", "Ready=True/Issued")
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role team-two", "RoleBinding team-two")
	testenv.Eventually(t, "namespaces forbidden", 10*time.Second, func() bool { return !allowed(t, listNamespaces(kc)) })

	// role removed (for a clusterRole again): no Role or RoleBinding in any namespace.
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) {
		kr.Spec.Role, kr.Spec.ClusterRole = nil, namespaceLister()
	})
	kr = waitConditions(t, ns, "editor", "Ready=True/Issued")
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "ClusterRole", "ClusterRoleBinding")
	testenv.Eventually(t, "pods in team-two forbidden, namespaces allowed", 10*time.Second, func() bool {
		return !allowed(t, listPods(kc, "team-two")) && allowed(t, listNamespaces(kc))
	})
	if kr.Status.Kubeconfig == "" {
		t.Fatal("the kubeconfig went with the edits")
	}

	// A Role moved to a namespace the target does not have yet: the old grants go at once,
	// the new Role follows when the namespace is there.
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Role = podReader("later") })
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "ClusterRole", "ClusterRoleBinding")
	createNamespace(t, target.Client, "later")
	waitConditions(t, ns, "editor", "Ready=True/Issued")
	waitHeld(t, target.Client, ns, "editor", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role later", "RoleBinding later", "ClusterRole", "ClusterRoleBinding")

	// An edit past the ceiling: Denied, and the request loses everything it held.
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) {
		kr.Spec.Role.Rules = append(kr.Spec.Role.Rules, operatorv1alpha1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	})
	kr = waitConditions(t, ns, "editor", "Ready=False/Denied", "Stalled=True/Denied")
	if kr.Status.Kubeconfig != "" || kr.Status.GrantedIn != nil {
		t.Errorf("status of a denied request: %+v", kr.Status)
	}
	if got := held(t, target.Client, ns, "editor"); len(got) != 0 {
		t.Errorf("a denied request still holds %v", got)
	}
	rejected(t, "the token of a request denied after an edit", kc)
	update(t, ns, "editor", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Role = podReader("team") })
	kr = waitConditions(t, ns, "editor", "Ready=True/Issued")
	reissued := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig issued after the denial to list pods in team", 10*time.Second, func() bool { return allowed(t, listPods(reissued, "team")) })
}

// TestClusterChangeWithdrawsFromTheOldCluster: spec.cluster stays mutable; changing it
// deletes the ServiceAccount (so every token of it dies), roles and bindings in the old
// cluster, then issues a kubeconfig for the new one.
func TestClusterChangeWithdrawsFromTheOldCluster(t *testing.T) {
	setup(t)
	second, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	createNamespace(t, second.Client, "team")
	createAll(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second-admin"}, Data: map[string][]byte{"kubeconfig": second.Environment().KubeConfig}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "second-admin"}}},
		&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mover"},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, Role: podReader("team"), ClusterRole: namespaceLister()}})
	kr := waitConditions(t, ns, "mover", "Ready=True/Issued")
	old := clientFrom(t, kr)
	testenv.Eventually(t, "the first kubeconfig to list pods in team", 10*time.Second, func() bool { return allowed(t, listPods(old, "team")) })

	update(t, ns, "mover", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Cluster = "second" })
	kr = waitConditions(t, ns, "mover", "Ready=True/Issued")
	if g := kr.Status.GrantedIn; g == nil || g.Name != "second" {
		t.Errorf("status.grantedIn %+v, want default/second", g)
	}
	if got := held(t, target.Client, ns, "mover"); len(got) != 0 {
		t.Errorf("left in the old cluster: %v", got)
	}
	waitHeld(t, second.Client, ns, "mover", "ServiceAccount "+kubeconfigctrl.TargetNamespace, "Role team", "RoleBinding team", "ClusterRole", "ClusterRoleBinding")
	rejected(t, "the old cluster's token", old)
	moved := clientFrom(t, kr)
	testenv.Eventually(t, "the new kubeconfig to list pods in team of the new cluster", 10*time.Second, func() bool { return allowed(t, listPods(moved, "team")) })
	raw, _ := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil || strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(second.Config.Host, "/") {
		t.Errorf("the new kubeconfig's server %q, want the new cluster's %q (%v)", cfg.Host, second.Config.Host, err)
	}

	// Deleting the request cleans the cluster its grants live in now.
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the request to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr))
	})
	if got := held(t, second.Client, ns, "mover"); len(got) != 0 {
		t.Errorf("left in the new cluster after deletion: %v", got)
	}
}

// pointAt rewrites the Cluster's kubeconfig Secret to reach server.
func pointAt(t *testing.T, secretName, server string) {
	t.Helper()
	raw := kubeconfigAt(t, server)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}
	if _, err := ctrlCreateOrUpdate(secret, func() { secret.Data = map[string][]byte{"kubeconfig": raw} }); err != nil {
		t.Fatal(err)
	}
}

func ctrlCreateOrUpdate(obj *corev1.Secret, mutate func()) (bool, error) {
	err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		mutate()
		return true, mgmt.Client.Create(ctx, obj)
	}
	if err != nil {
		return false, err
	}
	mutate()
	return false, mgmt.Client.Update(ctx, obj)
}

// TestRevokeWhileTheTargetIsUnreachable: revoke clears the status and deletes the
// published Secret at once; Ready=False says deleting the rest in the target is pending;
// once the target can be reached again, it is deleted and the old token is rejected.
func TestRevokeWhileTheTargetIsUnreachable(t *testing.T) {
	setup(t)
	pointAt(t, "flaky-admin", target.Config.Host)
	createAll(t, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flaky"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "flaky-admin"}}},
		roleRequest(ns, "revoked-offline", "flaky"))
	kr := waitConditions(t, ns, "revoked-offline", "Ready=True/Issued")
	kc := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig to get pods in team", 10*time.Second, func() bool { return canGetPods(t, kc) })

	pointAt(t, "flaky-admin", "https://"+testenv.FreeAddr(t))
	patchAnnotation(t, "revoked-offline", operatorv1alpha1.RevokeAnnotation, "true")
	kr = waitConditions(t, ns, "revoked-offline", "Ready=False/RevokePending", "Reconciling=True/RevokePending")
	if kr.Status.Kubeconfig != "" || kr.Status.SecretName != "" || kr.Status.ExpirationTimestamp != nil {
		t.Errorf("the status still carries the credential: %+v", kr.Status)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "revoked-offline-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the published Secret while the target is unreachable: %v", err)
	}
	msg := meta.FindStatusCondition(kr.Status.Conditions, "Ready").Message
	for _, want := range []string{"revoked", "pending", "default/flaky", "token"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q lacks %q", msg, want)
		}
	}
	if g := kr.Status.GrantedIn; g == nil || g.Name != "flaky" {
		t.Errorf("status.grantedIn %+v while the target is not cleaned up", g)
	}

	pointAt(t, "flaky-admin", target.Config.Host) // the Secret watch brings the request back
	kr = waitConditions(t, ns, "revoked-offline", "Ready=False/Revoked")
	if kr.Status.GrantedIn != nil {
		t.Errorf("status.grantedIn %+v after the withdrawal", kr.Status.GrantedIn)
	}
	if got := held(t, target.Client, ns, "revoked-offline"); len(got) != 0 {
		t.Errorf("left in the target: %v", got)
	}
	rejected(t, "the revoked token", kc)

	// revoke "false": a new ServiceAccount, roles and kubeconfig.
	patchAnnotation(t, "revoked-offline", operatorv1alpha1.RevokeAnnotation, "false")
	kr = waitConditions(t, ns, "revoked-offline", "Ready=True/Issued")
	reissued := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig issued after the revocation to get pods in team", 10*time.Second, func() bool { return canGetPods(t, reissued) })
}

// TestClusterChangeWhileTheOldClusterIsUnreachable: the kubeconfig for the old cluster is
// withdrawn at once; the new cluster is served only once the old one is cleaned up, and
// until then Ready=False, reason WithdrawalPending, names the old Cluster.
func TestClusterChangeWhileTheOldClusterIsUnreachable(t *testing.T) {
	setup(t)
	pointAt(t, "fading-admin", target.Config.Host)
	createAll(t, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fading"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "fading-admin"}}},
		roleRequest(ns, "leaving", "fading"))
	kr := waitConditions(t, ns, "leaving", "Ready=True/Issued")
	old := clientFrom(t, kr)

	pointAt(t, "fading-admin", "https://"+testenv.FreeAddr(t))
	update(t, ns, "leaving", func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Spec.Cluster = "target" })
	kr = waitConditions(t, ns, "leaving", "Ready=False/WithdrawalPending", "Reconciling=True/WithdrawalPending")
	if kr.Status.Kubeconfig != "" {
		t.Error("the old cluster's kubeconfig stays in the status while its withdrawal is pending")
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leaving-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the published Secret while the old cluster is unreachable: %v", err)
	}
	if msg := meta.FindStatusCondition(kr.Status.Conditions, "Ready").Message; !strings.Contains(msg, "default/fading") || !strings.Contains(msg, "pending") {
		t.Errorf("Ready message %q does not say what is pending where", msg)
	}

	pointAt(t, "fading-admin", target.Config.Host)
	kr = waitConditions(t, ns, "leaving", "Ready=True/Issued")
	if g := kr.Status.GrantedIn; g == nil || g.Name != "target" {
		t.Errorf("status.grantedIn %+v, want default/target", g)
	}
	// Both Clusters reach the same API server here: the old token dies with the old
	// ServiceAccount, which the new one replaces.
	rejected(t, "the old cluster's token", old)
	moved := clientFrom(t, kr)
	eventuallyGetsPods(t, "the new kubeconfig", moved)
}

// TestCrossNamespaceReferenceNeedsTheClustersGrant: the seed's pair, a KubeconfigRequest
// in default naming a Cluster in cluster-operator. Denied until the Cluster grants
// default (re-evaluated on the Cluster's change, no retry loop); then a real kubeconfig,
// within the ceiling as ever; withdrawing the grant withdraws the kubeconfig.
func TestCrossNamespaceReferenceNeedsTheClustersGrant(t *testing.T) {
	setup(t)
	const clusterNS = "cluster-operator"
	createNamespace(t, mgmt.Client, clusterNS)
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "example-cluster"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "example-admin"}}}
	createAll(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "example-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}, cluster)
	kr := roleRequest(ns, "example-cluster.compass-operator", "example-cluster")
	kr.Spec.ClusterNamespace = clusterNS
	createAll(t, kr)

	kr = waitConditions(t, ns, kr.Name, "Ready=False/Denied", "Stalled=True/Denied")
	msg := meta.FindStatusCondition(kr.Status.Conditions, "Ready").Message
	for _, want := range []string{"cluster-operator/example-cluster", "kubeconfigRequestNamespaces", `"default"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Denied message %q lacks %q", msg, want)
		}
	}
	if kr.Status.Kubeconfig != "" || kr.Status.GrantedIn != nil || len(held(t, target.Client, ns, kr.Name)) != 0 {
		t.Fatalf("an ungranted request got something: %+v", kr.Status)
	}

	setGrant := func(namespaces ...string) {
		t.Helper()
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			t.Fatal(err)
		}
		cluster.Spec.KubeconfigRequestNamespaces = namespaces
		if err := mgmt.Client.Update(ctx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	setGrant("other", ns)
	kr = waitConditions(t, ns, kr.Name, "Ready=True/Issued")
	if g := kr.Status.GrantedIn; g == nil || g.Namespace != clusterNS || g.Name != "example-cluster" {
		t.Errorf("status.grantedIn %+v", g)
	}
	kc := clientFrom(t, kr)
	testenv.Eventually(t, "the cross-namespace kubeconfig to get pods in team", 10*time.Second, func() bool { return canGetPods(t, kc) })
	if allowed(t, listNamespaces(kc)) {
		t.Error("the kubeconfig may list namespaces, which it never asked for")
	}

	// The grant widens nothing: the ceiling still denies secrets.
	greedy := roleRequest(ns, "greedy", "example-cluster")
	greedy.Spec.ClusterNamespace = clusterNS
	greedy.Spec.Role.Rules[0].Resources = []string{"secrets"}
	createAll(t, greedy)
	waitConditions(t, ns, "greedy", "Ready=False/Denied", "Stalled=True/Denied")

	// The grant withdrawn: so is everything the request held.
	setGrant("other")
	kr = waitConditions(t, ns, kr.Name, "Ready=False/Denied", "Stalled=True/Denied")
	if kr.Status.Kubeconfig != "" || kr.Status.GrantedIn != nil {
		t.Errorf("status after the grant went: %+v", kr.Status)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kr.Name + "-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the published Secret after the grant went: %v", err)
	}
	if got := held(t, target.Client, ns, kr.Name); len(got) != 0 {
		t.Errorf("left in the target after the grant went: %v", got)
	}
	rejected(t, "the token of a request no longer granted", kc)
}

// TestClusterNamespaceIsValidatedAtAdmission: spec.clusterNamespace is a namespace name.
func TestClusterNamespaceIsValidatedAtAdmission(t *testing.T) {
	for _, bad := range []string{"cluster-operator/example", "Cluster-Operator", strings.Repeat("a", 64)} {
		kr := roleRequest(ns, "bad-namespace", "c")
		kr.Spec.ClusterNamespace = bad
		err := mgmt.Client.Create(ctx, kr)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterNamespace") {
			t.Errorf("clusterNamespace %q: %v, want Invalid naming spec.clusterNamespace", bad, err)
		}
	}
}

// TestClusterDeletionWaitsOnlyForTheRequestsItGrants: with the Cluster controller
// running, a deleting Cluster waits for the request from a namespace it grants (which
// holds a ServiceAccount and roles in the cluster), never for one from a namespace it
// does not grant: naming a Cluster must not let anyone hold its deletion up.
func TestClusterDeletionWaitsOnlyForTheRequestsItGrants(t *testing.T) {
	runClusterAndKubeconfigControllers(t)
	createTarget(t)
	const clusterNS, intruderNS = "platform", "intruder"
	createNamespace(t, mgmt.Client, clusterNS)
	createNamespace(t, mgmt.Client, intruderNS)
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "shared"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "shared-admin"}, KubeconfigRequestNamespaces: []string{ns}}}
	granted, intruder := roleRequest(ns, "granted", "shared"), roleRequest(intruderNS, "squatter", "shared")
	granted.Spec.ClusterNamespace, intruder.Spec.ClusterNamespace = clusterNS, clusterNS
	createAll(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "shared-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}},
		cluster, granted, intruder)
	waitConditions(t, ns, "granted", "Ready=True/Issued")
	waitConditions(t, intruderNS, "squatter", "Ready=False/Denied", "Stalled=True/Denied")
	testenv.Eventually(t, "the Cluster Ready, with its finalizer", 30*time.Second, func() bool {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue && len(cluster.Finalizers) > 0
	})

	if err := mgmt.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster to wait for default/granted only", 30*time.Second, func() bool {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, "Ready")
		return c != nil && c.Reason == operatorv1alpha1.ReasonInUse && strings.Contains(c.Message, "default/granted")
	})
	if c := meta.FindStatusCondition(cluster.Status.Conditions, "Ready"); strings.Contains(c.Message, "squatter") {
		t.Errorf("the Cluster waits for a request it does not grant: %q", c.Message)
	}
	if err := mgmt.Client.Delete(ctx, granted); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster to go while the ungranted request stays", 30*time.Second, func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	})
	if got := held(t, target.Client, ns, "granted"); len(got) != 0 {
		t.Errorf("left in the target by the granted request: %v", got)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(intruder), intruder); err != nil {
		t.Errorf("the ungranted request: %v", err)
	}
}

// runClusterAndKubeconfigControllers runs both controllers in one manager until the test
// ends: a Cluster's deletion waits on the KubeconfigRequests the other reconciles.
func runClusterAndKubeconfigControllers(t *testing.T) {
	t.Helper()
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		if _, err := clusterctrl.Setup(mgr, clusterctrl.DefaultOptions()); err != nil {
			return err
		}
		_, err := kubeconfigctrl.Setup(mgr, kubeconfigctrl.DefaultOptions())
		return err
	})
}
