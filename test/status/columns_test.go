package status_test

// Tests of what `kubectl get` shows: every trustplane kind is in the kubectl category
// "trustplane", and every kind with conditions has Ready and Reason columns, so that
// Denied, Revoked or PoolExhausted show as themselves rather than as False.

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/config"
)

const (
	readyColumn  = `.status.conditions[?(@.type=="Ready")].status`
	reasonColumn = `.status.conditions[?(@.type=="Ready")].reason`
)

// TestEveryCRDIsInTheCategoryWithReadyAndReasonColumns: a table over the generated CRDs,
// so that a kind added later is held to the same.
func TestEveryCRDIsInTheCategoryWithReadyAndReasonColumns(t *testing.T) {
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if !slices.Contains(crd.Spec.Names.Categories, "trustplane") {
			t.Errorf("%s: categories %v lack trustplane", crd.Name, crd.Spec.Names.Categories)
		}
		for _, v := range crd.Spec.Versions {
			status, hasStatus := v.Schema.OpenAPIV3Schema.Properties["status"]
			if _, hasConditions := status.Properties["conditions"]; !hasStatus || !hasConditions {
				continue // no conditions to show (the Tengine-Ingress checksum kinds)
			}
			paths := map[string]string{}
			for _, c := range v.AdditionalPrinterColumns {
				paths[c.Name] = c.JSONPath
			}
			if paths["Ready"] != readyColumn || paths["Reason"] != reasonColumn {
				t.Errorf("%s %s: Ready column %q, Reason column %q, want %q and %q", crd.Name, v.Name, paths["Ready"], paths["Reason"], readyColumn, reasonColumn)
			}
		}
	}
}

// TestKubectlGetTrustplaneListsEveryKindWithItsReason: one object of each kind in a
// namespace; `kubectl get trustplane -A` (the real kubectl, with discovery from the API
// server; --show-kind names the kind even when only one is listed) lists them all, and
// each kind with conditions shows its Ready reason.
func TestKubectlGetTrustplaneListsEveryKindWithItsReason(t *testing.T) {
	ns := runControllers(t)
	escalate := []operatorv1alpha1.PolicyRule{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	// The name kubectl prints for each (<singular>.<group>/<name>) and its Ready reason
	// ("": a kind without conditions).
	type listed struct{ name, reason string }
	var kinds []listed
	for _, tc := range []struct {
		obj    client.Object
		name   string
		reason string
	}{
		{&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-secret"}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "not-yet"}},
			"jwksconfig.jwks.trustplane.io/no-secret", jwksv1alpha1.ReasonSecretNotFound},
		{&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}, Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "not-yet"}}},
			"cluster.operator.kyma-project.io/missing", operatorv1alpha1.ReasonKubeconfigMissing},
		{&operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escalator"}, Spec: operatorv1alpha1.KubeconfigRequestSpec{
			Cluster: "missing", Expiration: 3600, ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: escalate}}},
			"kubeconfigrequest.operator.kyma-project.io/escalator", operatorv1alpha1.ReasonDenied},
		{&cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty-pool"}, Spec: cp.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "shared"}},
			"subscriptionrequest.control-plane.kyma-project.io/empty-pool", cp.ReasonPoolExhausted},
		{&tenginev1.SecretCheckSum{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secrets"}, Spec: tenginev1.SecretCheckSumSpec{Checksum: "d41d8cd98f00b204e9800998ecf8427e", Timestamp: now}},
			"secretchecksum.tengine.taobao.org/secrets", ""},
		{&tenginev1.IngressCheckSum{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingresses"}, Spec: tenginev1.IngressCheckSumSpec{Checksum: "d41d8cd98f00b204e9800998ecf8427e", Timestamp: now}},
			"ingresschecksum.tengine.taobao.org/ingresses", ""},
	} {
		create(t, tc.obj)
		if tc.reason != "" {
			waitReason(t, tc.obj, tc.reason)
		}
		kinds = append(kinds, listed{tc.name, tc.reason})
	}

	stdout, stderr, code := kubectl(t, "get", "trustplane", "-A", "--show-kind")
	if code != 0 {
		t.Fatalf("kubectl get trustplane -A: exit %d\n%s", code, stderr)
	}
	rows := tableRows(stdout, ns)
	for _, k := range kinds {
		row, ok := rows[k.name]
		switch {
		case !ok:
			t.Errorf("%s is not listed:\n%s", k.name, stdout)
		case k.reason == "":
			if _, hasReady := row["READY"]; hasReady {
				t.Errorf("%s: a READY column for a kind without conditions", k.name)
			}
		case row["READY"] != "False" || row["REASON"] != k.reason:
			t.Errorf("%s: READY %q, REASON %q, want False and %s:\n%s", k.name, row["READY"], row["REASON"], k.reason, stdout)
		}
	}
}

// tableRows reads kubectl's tables (one per kind, each with its header) into the cells of
// each row of namespace, by the name kubectl prints. Columns are aligned: a cell starts
// where its header does.
func tableRows(out, namespace string) map[string]map[string]string {
	rows := map[string]map[string]string{}
	var header string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "NAMESPACE "):
			header = line
		case strings.TrimSpace(line) != "" && header != "":
			cells := cellsOf(header, line)
			if cells["NAMESPACE"] == namespace {
				rows[cells["NAME"]] = cells
			}
		}
	}
	return rows
}

func cellsOf(header, line string) map[string]string {
	cells := map[string]string{}
	fields := strings.Fields(header)
	at := 0
	for i, f := range fields {
		start := at + strings.Index(header[at:], f)
		at = start + len(f)
		end := len(line)
		if i+1 < len(fields) {
			end = min(len(line), at+strings.Index(header[at:], fields[i+1]))
		}
		if start < len(line) {
			cells[f] = strings.TrimSpace(line[start:end])
		}
	}
	return cells
}

// TestShortNamesWorkInKubectl: the short names `trustplane get` accepts are the CRDs'
// own, so the real kubectl resolves them through discovery too (it used to know only
// "jwks").
func TestShortNamesWorkInKubectl(t *testing.T) {
	for _, short := range []string{"jwks", "kcr", "sr", "scs", "ics"} {
		if _, stderr, code := kubectl(t, "get", short, "--all-namespaces"); code != 0 {
			t.Errorf("kubectl get %s -A exited %d: %s", short, code, stderr)
		}
	}
}
