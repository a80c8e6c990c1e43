package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/checksum"
)

// seed creates one object of most kinds in a new namespace, with the statuses their
// controllers would write: Ready ones, and a Cluster that is not.
func seed(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t, "get")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: operatorv1alpha1.ClusterSpec{Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: "aws"}}}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "prod", Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	sr := &controlplanev1alpha1.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: controlplanev1alpha1.SubscriptionRequestSpec{Provider: "aws", SubscriptionSelector: "shared"}}
	ids := []string{"1-1-aa", "2-3-bb"}
	scs := &tenginev1.SecretCheckSum{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-abcde",
		Annotations: map[string]string{checksum.ScopeAnnotation: checksum.NewScope([]string{ns}, checksum.DefaultVersionAnnotation).String()}},
		Spec: tenginev1.SecretCheckSumSpec{Checksum: checksum.Sum(ids), IDs: ids, Timestamp: metav1.Now()}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev", Annotations: map[string]string{roleaggregation.SelectorAnnotation: "team=dev"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	piece := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-pods", Labels: map[string]string{"team": "dev"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	create(t, cfg, cluster, kr, sr, scs, role, piece)

	cfg.Status = jwksv1alpha1.JWKSConfigStatus{Conditions: readyCondition(metav1.ConditionTrue, jwksv1alpha1.ReasonPublished, "Publishing 2 key(s)"),
		ObservedGeneration: cfg.Generation, LastKeyID: "kid-0123456789abcdefghij", KeyCount: 2}
	setStatus(t, cfg)
	cluster.Status = operatorv1alpha1.ClusterStatus{Conditions: readyCondition(metav1.ConditionFalse, operatorv1alpha1.ReasonWaitingForSubscription, "waiting for SubscriptionRequest prod"),
		ShootName: "c-1234567"}
	setStatus(t, cluster)
	kr.Status = operatorv1alpha1.KubeconfigRequestStatus{Conditions: readyCondition(metav1.ConditionTrue, operatorv1alpha1.ReasonIssued, "issued"),
		ObservedGeneration: kr.Generation, ExpirationTimestamp: &metav1.Time{Time: time.Now().Add(time.Hour)}, IssuedAt: &metav1.Time{Time: time.Now()},
		Kubeconfig: base64.StdEncoding.EncodeToString([]byte("apiVersion: v1\nkind: Config\n# CREDENTIAL-MARKER\n")), SecretName: "reader-kubeconfig"}
	setStatus(t, kr)
	sr.Status = controlplanev1alpha1.SubscriptionRequestStatus{Conditions: readyCondition(metav1.ConditionTrue, controlplanev1alpha1.ReasonAssigned, "assigned"),
		ObservedGeneration: sr.Generation, GardenerSecretName: "aws-shared-1"}
	setStatus(t, sr)
	return ns
}

func TestGet(t *testing.T) {
	ns := seed(t)

	// Every kind of the namespace: the not-Ready Cluster first, exit 1.
	r := tp(t, "get", "-n", ns)
	out := r.fails(t, "1 of 6 objects are not Ready")
	rows := lines(out)
	if len(rows) != 7 || !strings.HasPrefix(rows[0], "NAME ") || !strings.HasPrefix(rows[1], "cluster/prod ") {
		t.Fatalf("get -n %s:\n%s", ns, out)
	}
	contains(t, out, "False   WaitingForSubscription", "phase=WaitingForSubscription shoot=c-1234567",
		"jwksconfig/issuer", "kid=kid-01234567… keys=2",
		"role/dev", "Aggregated", "rules=1 selector=team=dev",
		"secretchecksum/secret-abcde", "Published", "ids=2",
		"kubeconfigrequest/reader", "expires=in 59m",
		"subscriptionrequest/prod", "credential=aws-shared-1")
	if strings.Contains(out, "clusterrole/") {
		t.Error("one namespace lists no cluster-scoped objects")
	}

	// One kind: its own columns; all Ready, exit 0.
	out = tp(t, "get", "jwksconfig", "-n", ns).ok(t)
	if rows := lines(out); len(rows) != 2 || !strings.HasPrefix(rows[0], "NAME     READY   REASON      KID             KEYS   AGE") || !strings.HasPrefix(rows[1], "issuer   True    Published   kid-01234567…   2") {
		t.Errorf("get jwksconfig:\n%s", out)
	}
	out = tp(t, "get", "jwks", "issuer", "-n", ns, "-o", "wide").ok(t)
	contains(t, out, "kid-0123456789abcdefghij", "SIGNING", "ISSUER", "MESSAGE", "Publishing 2 key(s)")
	out = tp(t, "get", "clusters,kcr", "-n", ns).fails(t, "1 of 2 objects are not Ready")
	contains(t, out, "cluster/prod", "kubeconfigrequest/reader")

	// -A: every namespace, cluster-scoped kinds too.
	out = tp(t, "get", "-A").fails(t, "objects are not Ready")
	contains(t, out, "NAMESPACE", ns+" ", "jwksconfig/issuer", "clusterrole/")

	// -o json and yaml: the objects as a List, never an issued kubeconfig.
	r = tp(t, "get", "-n", ns, "-o", "json")
	r.fails(t, "1 of 6 objects are not Ready")
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || list.Kind != "List" || len(list.Items) != 6 || list.Items[0].Kind != "Cluster" {
		t.Errorf("get -o json: %v\n%s", err, r.stdout)
	}
	out = tp(t, "get", "kubeconfigrequest", "reader", "-n", ns, "-o", "yaml").ok(t)
	contains(t, out, "kind: KubeconfigRequest", "secretName: reader-kubeconfig")
	if strings.Contains(out, "managedFields") || strings.Contains(out, "kubeconfig: ") || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte("apiVersion"))[:8]) {
		t.Errorf("-o yaml shows managed fields or the credential:\n%s", out)
	}

	// A user who may list only JWKSConfigs: those, and exit 1 saying what is missing.
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jwks-viewer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{jwksv1alpha1.GroupVersion.Group}, Resources: []string{"jwksconfigs"}, Verbs: []string{"list"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jwks-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "jwks-viewer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}}})
	r = tpRaw(t, "get", "-n", ns, "--kubeconfig", env.ServiceAccountKubeconfig(t, ns, "viewer"))
	out = r.fails(t, "may not list roles, secretchecksums, ingresschecksums, podcertificaterequests, clusters, kubeconfigrequests, subscriptionrequests (forbidden): they are not shown")
	if rows := lines(out); len(rows) != 2 || !strings.HasPrefix(rows[1], "jwksconfig/issuer ") {
		t.Errorf("get as a JWKSConfig viewer:\n%s", out)
	}

	// An empty namespace: nothing, exit 0; with -o json an empty List.
	empty := env.Namespace(t, "empty")
	r = tp(t, "get", "-n", empty)
	if r.code != 0 || r.stdout != "" || r.stderr != "No trustplane objects found in namespace "+empty+".\n" {
		t.Errorf("empty namespace: %+v", r)
	}
	out = tp(t, "get", "-n", empty, "-o", "json").ok(t)
	contains(t, out, `"items": []`)
}

func TestGetAggregatedClusterRoles(t *testing.T) {
	sel := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"cli-test/aggregate": "true"}}}}
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
	create(t,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cli-test-piece", Labels: map[string]string{"cli-test/aggregate": "true"}}, Rules: []rbacv1.PolicyRule{rule}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cli-test-aggregated"}, AggregationRule: sel, Rules: []rbacv1.PolicyRule{rule}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cli-test-behind"}, AggregationRule: sel},
	)
	out := tp(t, "get", "clusterrole", "cli-test-aggregated").ok(t)
	contains(t, out, "cli-test-aggregated   True    Aggregated   1       1")
	out = tp(t, "get", "clusterrole", "cli-test-behind", "-o", "wide").fails(t, "1 of 1 objects are not Ready")
	contains(t, out, "RulesOutOfDate", "0 rules; aggregating the 1 matching roles now gives 1 (cli-test/aggregate=true)")
	// Objects that are not aggregating are not trustplane's.
	tp(t, "get", "clusterrole", "cli-test-piece").fails(t, `clusterrole "cli-test-piece" not found`)
}

// TestGetRevokedRequestIsNoFailure: a KubeconfigRequest revoked on purpose is shown as
// Revoked, and get exits 0 for it: a revocation asked for is no failure.
func TestGetRevokedRequestIsNoFailure(t *testing.T) {
	ns := env.Namespace(t, "revoked")
	kr := kubeconfigRequest(ns, "leaver", "prod")
	kr.Annotations = map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}
	create(t, kr)
	kr.Status = operatorv1alpha1.KubeconfigRequestStatus{ObservedGeneration: kr.Generation,
		Conditions: readyCondition(metav1.ConditionFalse, operatorv1alpha1.ReasonRevoked, `revoked; set operator.kyma-project.io/revoke to "false" to issue a new kubeconfig`)}
	setStatus(t, kr)

	out := tp(t, "get", "-n", ns).ok(t)
	if rows := lines(out); len(rows) != 2 || !strings.HasPrefix(rows[1], "kubeconfigrequest/leaver   False   Revoked ") {
		t.Errorf("get -n %s:\n%s", ns, out)
	}
	out = tp(t, "get", "kcr", "leaver", "-n", ns).ok(t)
	contains(t, out, "leaver   False   Revoked")

	// Taken back (revoke "false"), it is not Ready until a new credential is issued.
	if err := env.Client.Patch(ctx, kr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"operator.kyma-project.io/revoke":"false"}}}`))); err != nil {
		t.Fatal(err)
	}
	tp(t, "get", "-n", ns).fails(t, "1 of 1 objects are not Ready")
}

// TestGetUpdateThrottled: while a JWKSConfig's update waits for the minimum update
// interval (Ready=True Published for the set still served, Reconciling=True
// UpdateThrottled), get shows UpdateThrottled and when the change is published.
func TestGetUpdateThrottled(t *testing.T) {
	ns := env.Namespace(t, "throttled")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	throttled := "the set changed within 5m0s of its last update; the change is published at 2030-01-01T00:05:00Z, the previous set is served until then"
	cfg.Status = jwksv1alpha1.JWKSConfigStatus{ObservedGeneration: cfg.Generation, LastKeyID: "kid-0123456789abcdefghij", KeyCount: 1,
		Conditions: append(readyCondition(metav1.ConditionTrue, jwksv1alpha1.ReasonPublished, "Publishing 1 key(s)"),
			metav1.Condition{Type: conditions.Reconciling, Status: metav1.ConditionTrue, Reason: jwksv1alpha1.ReasonUpdateThrottled, Message: throttled, LastTransitionTime: metav1.Now()})}
	setStatus(t, cfg)

	out := tp(t, "get", "jwksconfig", "-n", ns).ok(t)
	if rows := lines(out); len(rows) != 2 || !strings.HasPrefix(rows[1], "issuer   True    UpdateThrottled   kid-01234567…") {
		t.Errorf("get jwksconfig:\n%s", out)
	}
	out = tp(t, "get", "jwksconfig", "-n", ns, "-o", "wide").ok(t)
	contains(t, out, "UpdateThrottled", throttled)
	out = tp(t, "describe", "jwksconfig", "issuer", "-n", ns).ok(t)
	contains(t, out, "JWKSConfig "+ns+"/issuer Ready=True UpdateThrottled", "Reconciling=True UpdateThrottled: "+throttled)
}
