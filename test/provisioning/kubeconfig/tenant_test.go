package kubeconfig_test

// Tests of issue 17 through the controller on the real API servers: a tenant cannot make
// the operator act beyond the tenant's own rights — no kubeconfig for another tenant's
// Shoot, no rule over the ceiling's escalation routes, no lifetime over the maximum.

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// nothingIssued: no kubeconfig in the status, none published.
func nothingIssued(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) {
	t.Helper()
	if kr.Status.Kubeconfig != "" || kr.Status.GrantedIn != nil {
		t.Errorf("%s: issued (granted in %v)", kr.Name, kr.Status.GrantedIn)
	}
	err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: kr.Namespace, Name: kr.Name + "-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: published Secret: %v", kr.Name, err)
	}
}

func readyMessage(kr *operatorv1alpha1.KubeconfigRequest) string {
	if c := meta.FindStatusCondition(kr.Status.Conditions, "Ready"); c != nil {
		return c.Message
	}
	return ""
}

// TestForgedShootNameIsRefused: alice's Cluster status names bob's Shoot (a forged
// status.shootName that passes admission); then it names her own Shoot's name, but that
// Shoot is labelled as bob's Cluster's. Both are refused (Stalled, ShootMismatch) without
// asking the garden for an admin kubeconfig, and nothing is issued.
func TestForgedShootNameIsRefused(t *testing.T) {
	const project = "garden-tenant"
	adminRequests := setupWithFakeGarden(t, project)
	bobsShoot, alicesShoot := shoot.Name(ns, "t17-bob"), shoot.Name(ns, "t17-alice")
	createShoot(t, project, bobsShoot, ns, "t17-bob")
	alice := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t17-alice"}}
	createAll(t, alice, roleRequest(ns, "t17-alice-reader", "t17-alice"))
	markProvisioned(t, alice, bobsShoot)
	kr := waitConditions(t, ns, "t17-alice-reader", "Ready=False/ShootMismatch", "Stalled=True/ShootMismatch")
	if m := readyMessage(kr); !strings.Contains(m, bobsShoot) || !strings.Contains(m, alicesShoot) {
		t.Errorf("message %q: should name the forged and the derived shoot", m)
	}
	nothingIssued(t, kr)

	// Her own Shoot's name, but the Shoot there is someone else's.
	createShoot(t, project, alicesShoot, ns, "t17-bob")
	markProvisioned(t, alice, alicesShoot)
	waitFor(t, "the owner labels to be checked", func() bool {
		kr = waitConditions(t, ns, "t17-alice-reader", "Ready=False/ShootMismatch", "Stalled=True/ShootMismatch")
		return strings.Contains(readyMessage(kr), "labelled")
	})
	nothingIssued(t, kr)
	if n := adminRequests.Load(); n != 0 {
		t.Errorf("%d admin kubeconfigs asked for a shoot that is not the Cluster's", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShootNameIsValidatedAtAdmission: status.shootName is refused at admission unless it
// has the form of the Shoot names the Cluster controller derives.
func TestShootNameIsValidatedAtAdmission(t *testing.T) {
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t17-admission"}}
	createAll(t, c)
	c.Status.ShootName = "bobs-shoot"
	err := mgmt.Client.Status().Update(ctx, c)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.shootName") || !strings.Contains(err.Error(), "e.g. qe1rmevfn4hmaww") {
		t.Errorf("status.shootName %q: %v", c.Status.ShootName, err)
	}
	for _, name := range []string{shoot.Name(ns, c.Name), shoot.LegacyName(ns, c.Name)} {
		c.Status.ShootName = name
		if err := mgmt.Client.Status().Update(ctx, c); err != nil {
			t.Errorf("the derived shoot name %q is refused: %v", name, err)
		}
	}
	for _, name := range []string{"9" + shoot.Name(ns, c.Name)[1:], shoot.Name(ns, c.Name) + "a", "c-12345678", "Qe1rmevfn4hmaww"} {
		c.Status.ShootName = name
		if err := mgmt.Client.Status().Update(ctx, c); !apierrors.IsInvalid(err) {
			t.Errorf("status.shootName %q: %v, want Invalid", name, err)
		}
	}
}

// TestCeilingDeniesEscalationRoutes: one request per escalation route, each Denied
// (Stalled) naming its route, nothing issued; exec in the tenant's own namespace and
// plain certificate signing requests pass.
func TestCeilingDeniesEscalationRoutes(t *testing.T) {
	setup(t)
	role := func(namespace string, groups, resources, verbs []string) operatorv1alpha1.KubeconfigRequestSpec {
		return operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: namespace,
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: groups, Resources: resources, Verbs: verbs}}}}
	}
	cluster := func(groups, resources, verbs []string) operatorv1alpha1.KubeconfigRequestSpec {
		return operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{
			Rules: []operatorv1alpha1.PolicyRule{{APIGroups: groups, Resources: resources, Verbs: verbs}}}}
	}
	core, certs := []string{""}, []string{"certificates.k8s.io"}
	cases := map[string]struct {
		spec  operatorv1alpha1.KubeconfigRequestSpec
		route string
	}{
		"t17-secrets":     {role("team", core, []string{"secrets"}, []string{"list"}), "secrets"},
		"t17-token":       {role("team", core, []string{"serviceaccounts/token"}, []string{"create"}), "serviceaccount-token"},
		"t17-exec":        {role("kube-system", core, []string{"pods/exec"}, []string{"create", "get"}), "pods-exec"},
		"t17-attach":      {role(kubeconfigctrl.TargetNamespace, core, []string{"pods/attach"}, []string{"create"}), "pods-attach"},
		"t17-portforward": {cluster(core, []string{"pods/portforward"}, []string{"create"}), "pods-portforward"},
		"t17-ephemeral":   {role("kube-system", core, []string{"pods/ephemeralcontainers"}, []string{"patch"}), "pods-ephemeralcontainers"},
		"t17-pods":        {role(kubeconfigctrl.TargetNamespace, core, []string{"pods"}, []string{"create"}), "workloads"},
		"t17-deployments": {cluster([]string{"apps"}, []string{"deployments"}, []string{"create"}), "workloads"},
		"t17-nodes-proxy": {cluster(core, []string{"nodes/proxy"}, []string{"get"}), "nodes-proxy"},
		"t17-csr-approve": {cluster([]string{"certificates.k8s.io"}, []string{"certificatesigningrequests/approval"}, []string{"update"}), "csr-approval"},
		"t17-signers":     {cluster([]string{"certificates.k8s.io"}, []string{"signers"}, []string{"approve", "sign"}), "csr-approval"},
		"t17-webhooks":    {cluster([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations"}, []string{"create"}), "admission-webhooks"},
		"t17-pv":          {cluster(core, []string{"persistentvolumes"}, []string{"create"}), "persistentvolumes"},
		// Issue 37: each of these was issued, and worked, on the code before.
		"t37-crds":          {cluster([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, []string{"update"}), "crds"},
		"t37-apiservices":   {cluster([]string{"apiregistration.k8s.io"}, []string{"apiservices"}, []string{"create"}), "apiservices"},
		"t37-namespaces":    {cluster(core, []string{"namespaces"}, []string{"patch"}), "namespaces"},
		"t37-endpointslice": {role("team", []string{"discovery.k8s.io"}, []string{"endpointslices"}, []string{"create", "update"}), "endpoints"},
		"t37-endpoints":     {role("team", core, []string{"endpoints"}, []string{"update"}), "endpoints"},
		"t37-proxy":         {role("team", core, []string{"services/proxy"}, []string{"get"}), "proxies"},
		"t37-aws-auth":      {role("kube-system", core, []string{"configmaps"}, []string{"update", "patch"}), "protected-namespace-writes"},
		"t37-cluster-write": {cluster(core, []string{"configmaps"}, []string{"create"}), "protected-namespace-writes"},
		"t37-pod-secrets":   {role("team", core, []string{"pods"}, []string{"create"}), `route "secrets"`},
		"t17-escalate":      {cluster([]string{"rbac.authorization.k8s.io"}, []string{"roles"}, []string{"escalate"}), `verb "escalate"`},
		"t17-bind":          {role("team", []string{"rbac.authorization.k8s.io"}, []string{"rolebindings"}, []string{"bind"}), `verb "bind"`},
		"t17-impersonate":   {cluster(core, []string{"users"}, []string{"impersonate"}), `verb "impersonate"`},
		"t17-wildcard":      {cluster([]string{"*"}, []string{"*"}, []string{"get"}), "secrets"},
		// Issue 21: certificates.k8s.io is an allow-list; the first is the request.
		"t21-nodeclient":     {cluster(certs, []string{"certificatesigningrequests", "certificatesigningrequests/nodeclient"}, []string{"create"}), "csr-nodeclient"},
		"t21-selfnodeclient": {cluster(certs, []string{"certificatesigningrequests/selfnodeclient"}, []string{"create"}), "csr-selfnodeclient"},
		"t21-csr-wildcard":   {cluster(certs, []string{"certificatesigningrequests/*"}, []string{"create"}), "csr-nodeclient"},
		"t21-group-wildcard": {cluster([]string{"*"}, []string{"*/nodeclient"}, []string{"create"}), "csr-nodeclient"},
		"t21-attest":         {cluster(certs, []string{"signers"}, []string{"attest"}), "trust-bundles"},
		"t21-pod-certs":      {role("team", certs, []string{"podcertificaterequests"}, []string{"create"}), "pod-certificates"},
		"t21-csr-update":     {cluster(certs, []string{"certificatesigningrequests"}, []string{"update"}), "certificates-other"},
	}
	for name, tc := range cases {
		createAll(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tc.spec})
	}
	createAll(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t17-exec-own"},
		Spec: role("team", core, []string{"pods/exec"}, []string{"create"})})
	// A plain CSR still needs an approver: creating and reading them passes.
	createAll(t, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t21-csr-plain"},
		Spec: cluster(certs, []string{"certificatesigningrequests"}, []string{"create", "get", "list", "watch"})})
	for name, tc := range cases {
		kr := waitConditions(t, ns, name, "Ready=False/Denied", "Stalled=True/Denied")
		if m := readyMessage(kr); !strings.Contains(m, tc.route) {
			t.Errorf("%s: message %q does not name %s", name, m, tc.route)
		}
		nothingIssued(t, kr)
	}
	waitConditions(t, ns, "t17-exec-own", "Ready=True/Issued")
	waitConditions(t, ns, "t21-csr-plain", "Ready=True/Issued")
}

// TestExpirationOverTheMaximumIsRefused: over --kubeconfig-max-expiration, Stalled with
// ExpirationTooLong and nothing issued; over a year, refused at admission.
func TestExpirationOverTheMaximumIsRefused(t *testing.T) {
	opts := kubeconfigctrl.DefaultOptions()
	opts.MaxExpiration = time.Hour
	setupWith(t, opts, nil)
	long := roleRequest(ns, "t17-long", "target")
	long.Spec.Expiration = 7200
	ok := roleRequest(ns, "t17-hour", "target")
	createAll(t, long, ok)
	kr := waitConditions(t, ns, "t17-long", "Ready=False/ExpirationTooLong", "Stalled=True/ExpirationTooLong")
	if m := readyMessage(kr); !strings.Contains(m, "7200s") || !strings.Contains(m, "--kubeconfig-max-expiration=1h0m0s") {
		t.Errorf("message %q", m)
	}
	nothingIssued(t, kr)
	waitConditions(t, ns, "t17-hour", "Ready=True/Issued")

	tooLong := roleRequest(ns, "t17-year", "target")
	tooLong.Spec.Expiration = 400 * 24 * 3600
	if err := mgmt.Client.Create(ctx, tooLong); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expiration") {
		t.Errorf("expiration of 400 days: %v", err)
	}
}

// TestPodsRunOnlyWherePodSecurityIsEnforced: with secrets allowed, a Role that creates pods
// is issued only for a namespace of the target that enforces Pod Security baseline (the
// target's own admission then refuses a privileged hostPath pod made with it); in a
// namespace without, it is denied naming the label; relabelling the namespace privileged
// withdraws the kubeconfig at the next reconcile.
func TestPodsRunOnlyWherePodSecurityIsEnforced(t *testing.T) {
	opts := kubeconfigctrl.DefaultOptions()
	opts.Ceiling.AllowSecrets = true
	setupWith(t, opts, nil)
	for name, labels := range map[string]map[string]string{
		"psa-none":     nil,
		"psa-baseline": {operatorv1alpha1.PodSecurityEnforceLabel: "baseline"},
	} {
		if err := target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	podsIn := func(name, namespace string) *operatorv1alpha1.KubeconfigRequest {
		return &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600, Role: &operatorv1alpha1.RoleSpec{Namespace: namespace,
				Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}}}}}
	}
	createAll(t, podsIn("t37-pods-no-psa", "psa-none"), podsIn("t37-pods-baseline", "psa-baseline"))
	deletedAtTheEnd(t, "t37-pods-no-psa", "t37-pods-baseline")

	kr := waitConditions(t, ns, "t37-pods-no-psa", "Ready=False/Denied", "Stalled=True/Denied")
	if m := readyMessage(kr); !strings.Contains(m, `does not enforce Pod Security baseline or restricted (pod-security.kubernetes.io/enforce="")`) || !strings.Contains(m, `route "workloads"`) {
		t.Errorf("denial %q", m)
	}
	nothingIssued(t, kr)

	kr = waitConditions(t, ns, "t37-pods-baseline", "Ready=True/Issued")
	kc := clientFrom(t, kr)
	privileged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-root", Namespace: "psa-baseline"}, Spec: corev1.PodSpec{
		HostPID: true,
		Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts: []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}}},
		Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
	}}
	if _, err := kc.CoreV1().Pods("psa-baseline").Create(ctx, privileged, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a privileged hostPath pod made with the issued kubeconfig: %v", err)
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "psa-baseline"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := kc.CoreV1().Pods("psa-baseline").Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Errorf("a baseline pod made with the issued kubeconfig: %v", err)
	}

	// Someone else relabels the namespace privileged: the next reconcile withdraws.
	namespace := &corev1.Namespace{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: "psa-baseline"}, namespace); err != nil {
		t.Fatal(err)
	}
	namespace.Labels[operatorv1alpha1.PodSecurityEnforceLabel] = "privileged"
	if err := target.Client.Update(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, "t37-pods-baseline", "example.com/look-again", "now")
	kr = waitConditions(t, ns, "t37-pods-baseline", "Ready=False/Denied", "Stalled=True/Denied")
	nothingIssued(t, kr)
}
