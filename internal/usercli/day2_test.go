package usercli

import (
	"bytes"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/aggregation/roleaggregation"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func ready(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: conditions.Ready, Status: status, Reason: reason, Message: "said " + reason}}
}

func TestKindNames(t *testing.T) {
	for in, want := range map[string]string{"jwks": "jwksconfig", "JWKSConfigs": "jwksconfig", "kcr": "kubeconfigrequest", "pcr": "podcertificaterequest",
		"secretchecksums.tengine.taobao.org": "secretchecksum", "ca": "signerca", "Cluster": "cluster", "clusterroles": "clusterrole"} {
		k, err := kindNamed(in)
		if err != nil || k.Name != want {
			t.Errorf("%s: %v %v, want %s", in, k, err, want)
		}
	}
	if _, err := kindNamed("secrets"); err == nil || !strings.Contains(err.Error(), `unknown kind "secrets" (one of jwksconfig,`) {
		t.Errorf("unknown kind: %v", err)
	}
	// The kinds reconcile asks for record the request they handled; every kind's list
	// type is the scheme's.
	s := scheme.New()
	for _, k := range kinds {
		obj, err := s.New(k.GVK)
		if err != nil {
			t.Errorf("%s: %v", k.Name, err)
			continue
		}
		if _, ok := obj.(conditions.ReconcileRequestStatus); ok != (k.controller != "") {
			t.Errorf("%s: records handled reconcile requests %t, reconcilable %t", k.Name, ok, k.controller != "")
		}
		if gvks, _, err := s.ObjectKinds(k.newList()); err != nil || gvks[0].Kind != k.GVK.Kind+"List" {
			t.Errorf("%s: list kinds %v %v", k.Name, gvks, err)
		}
	}
}

func TestConditionRows(t *testing.T) {
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Name: "issuer", Namespace: "ns", Generation: 2},
		Status: jwksv1alpha1.JWKSConfigStatus{Conditions: ready(metav1.ConditionTrue, jwksv1alpha1.ReasonPublished), ObservedGeneration: 2, LastKeyID: "abcdefghijklmnop", KeyCount: 2}}
	r := jwksRow(cfg, now)
	if r.Ready != metav1.ConditionTrue || r.Reason != jwksv1alpha1.ReasonPublished || strings.Join(r.Facts, " ") != "abcdefghijklmnop 2 <none> <none>" {
		t.Errorf("ready: %+v", r)
	}
	cfg.Generation = 3 // a change not reconciled yet: Ready is about the previous generation
	if r := jwksRow(cfg, now); r.Ready != metav1.ConditionUnknown || !strings.Contains(r.Message, "generation 3 is not reconciled") {
		t.Errorf("stale: %+v", r)
	}
	cfg.Status.Conditions = nil
	if r := jwksRow(cfg, now); r.Ready != metav1.ConditionUnknown || r.Message != "not reconciled yet" {
		t.Errorf("new: %+v", r)
	}
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "c", ClusterNamespace: "infra"},
		Status: operatorv1alpha1.KubeconfigRequestStatus{Conditions: ready(metav1.ConditionTrue, operatorv1alpha1.ReasonIssued),
			ExpirationTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}}}
	if r := kubeconfigRow(kr, now); r.Ready != metav1.ConditionFalse || r.Facts[0] != "infra/c" || r.Facts[1] != "60s ago" {
		t.Errorf("expired kubeconfig: %+v", r)
	}
	for _, tc := range []struct {
		conds []metav1.Condition
		phase string
	}{
		{nil, "Pending"},
		{ready(metav1.ConditionFalse, operatorv1alpha1.ReasonProvisioning), operatorv1alpha1.ReasonProvisioning},
		{append(ready(metav1.ConditionFalse, operatorv1alpha1.ReasonAdministratorsBound), metav1.Condition{Type: operatorv1alpha1.ConditionClusterProvisioned, Status: metav1.ConditionTrue}), "Provisioned"},
		{ready(metav1.ConditionTrue, operatorv1alpha1.ReasonAdministratorsBound), "Ready"},
		{append(ready(metav1.ConditionFalse, operatorv1alpha1.ReasonInvalidSpec), metav1.Condition{Type: conditions.Stalled, Status: metav1.ConditionTrue}), "Failed"},
	} {
		c := &operatorv1alpha1.Cluster{Status: operatorv1alpha1.ClusterStatus{Conditions: tc.conds}}
		if got := clusterPhase(c); got != tc.phase {
			t.Errorf("phase of %v = %s, want %s", tc.conds, got, tc.phase)
		}
	}
}

func TestAggregationRows(t *testing.T) {
	rule := func(verb string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{"pods"}}
	}
	sel := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg": "x"}}}}
	roles := []rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "good"}, AggregationRule: sel, Rules: []rbacv1.PolicyRule{rule("get"), rule("list")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "stale"}, AggregationRule: sel, Rules: []rbacv1.PolicyRule{rule("get")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Nope"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"agg": "x"}}, Rules: []rbacv1.PolicyRule{rule("get")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"agg": "x"}}, Rules: []rbacv1.PolicyRule{rule("list")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	}
	rows := clusterRoleRows(roles)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want the 3 aggregating roles", len(rows))
	}
	want := map[string]string{"good": aggregation.ReasonAggregated, "stale": aggregation.ReasonRulesOutOfDate, "bad": aggregation.ReasonInvalidSelector}
	for _, r := range rows {
		if r.Reason != want[r.Name] || (r.Reason == aggregation.ReasonAggregated) != r.ready() {
			t.Errorf("%s: %s %s %q", r.Name, r.Ready, r.Reason, r.Message)
		}
	}
	if rows[0].Facts[0] != "2" || rows[0].Facts[1] != "1" || rows[0].Facts[2] != "2" {
		t.Errorf("facts of good: %v", rows[0].Facts)
	}
	nsRoles := []rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "dev", Annotations: map[string]string{roleaggregation.SelectorAnnotation: "team=dev"}}, Rules: []rbacv1.PolicyRule{rule("get")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "piece", Labels: map[string]string{"team": "dev"}}, Rules: []rbacv1.PolicyRule{rule("get")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "piece", Labels: map[string]string{"team": "dev"}}, Rules: []rbacv1.PolicyRule{rule("list")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "broken", Annotations: map[string]string{roleaggregation.SelectorAnnotation: "team in ("}}},
	}
	rs := roleRows(nsRoles)
	if len(rs) != 2 || !rs[0].ready() || rs[1].Reason != aggregation.ReasonInvalidSelector {
		t.Errorf("roles: %+v", rs)
	}
}

func TestChecksumRows(t *testing.T) {
	ids := []string{"1-1-aa", "2-1-bb"}
	good := &tenginev1.SecretCheckSum{ObjectMeta: metav1.ObjectMeta{Name: "secret-x", Namespace: "ns",
		Annotations: map[string]string{checksum.ScopeAnnotation: "namespaces=*; version-annotation=v"}, Labels: map[string]string{"checksum.trustplane.io/scope-kind": "cluster"}},
		Spec: tenginev1.SecretCheckSumSpec{Checksum: checksum.Sum(ids), IDs: ids}}
	if r := checksumRow(good, good.Spec.Checksum, good.Spec.IDs); !r.ready() || r.Reason != tenginev1alpha1.ReasonPublished || r.Facts[1] != "2" || r.Facts[2] != "cluster" {
		t.Errorf("good: %+v", r)
	}
	bad := good.DeepCopy()
	bad.Spec.Checksum = "0000"
	if r := checksumRow(bad, bad.Spec.Checksum, bad.Spec.IDs); r.ready() || r.Reason != tenginev1alpha1.ReasonChecksumMismatch {
		t.Errorf("bad: %+v", r)
	}
	omitted := bad.DeepCopy()
	omitted.Annotations[checksum.IDsOmittedAnnotation] = "30000 IDs, more than 20000"
	omitted.Spec.IDs = nil
	if r := checksumRow(omitted, omitted.Spec.Checksum, nil); !r.ready() || r.Reason != tenginev1alpha1.ReasonIDsOmitted || r.Facts[1] != "omitted" {
		t.Errorf("omitted: %+v", r)
	}
}

func TestPodCertificateRows(t *testing.T) {
	pcr := func(cond string, notAfter, refresh time.Duration) *certificatesv1.PodCertificateRequest {
		p := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps"},
			Spec: certificatesv1.PodCertificateRequestSpec{PodName: "web", SignerName: "example.com/s"}}
		if cond != "" {
			p.Status.Conditions = []metav1.Condition{{Type: cond, Status: metav1.ConditionTrue, Reason: "R" + cond}}
		}
		if cond == podcert.OutcomeIssued {
			p.Status.NotAfter, p.Status.BeginRefreshAt = &metav1.Time{Time: now.Add(notAfter)}, &metav1.Time{Time: now.Add(refresh)}
		}
		return p
	}
	for _, tc := range []struct {
		p      *certificatesv1.PodCertificateRequest
		ready  bool
		reason string
		state  string
	}{
		{pcr("", 0, 0), false, certificates.ReasonPending, podcert.StateNotYetIssued},
		{pcr(podcert.OutcomeIssued, time.Hour, 30*time.Minute), true, "RIssued", podcert.StateFresh},
		{pcr(podcert.OutcomeIssued, time.Hour, -11*time.Minute), true, certificates.ReasonOverdueForRefresh, podcert.StateOverdueForRefresh},
		{pcr(podcert.OutcomeIssued, -time.Minute, -time.Hour), false, certificates.ReasonExpired, podcert.StateExpired},
		{pcr(podcert.OutcomeDenied, 0, 0), false, "RDenied", podcert.StateDenied},
		{pcr(podcert.OutcomeFailed, 0, 0), false, "RFailed", podcert.StateFailed},
	} {
		r := pcrRow(tc.p, now)
		if r.ready() != tc.ready || r.Reason != tc.reason || r.Facts[2] != tc.state {
			t.Errorf("%s: got %s %s %s", tc.state, r.Ready, r.Reason, r.Facts[2])
		}
	}

	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := testcerts.NewChain(key, "signing CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	bundle := func(pem []byte) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "s:primary-bundle"},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: string(pem)}}
	}
	if r := signerCARow(bundle(ca.PEM()), now); !r.ready() || r.Reason != certificates.ReasonBundlePublished || r.Facts[1] != "2" || r.Facts[2] != "signing CA" {
		t.Errorf("bundle: %+v", r)
	}
	if r := signerCARow(bundle(ca.PEM()), now.Add(2*time.Hour)); r.ready() || r.Reason != certificates.ReasonExpired {
		t.Errorf("expired bundle: %+v", r)
	}
	if r := signerCARow(bundle([]byte("junk")), now); r.ready() || r.Reason != certificates.ReasonInvalidCA {
		t.Errorf("empty bundle: %+v", r)
	}
	// A canaried rotation that failed: the bundle is fine, the rotation says why it holds.
	failed := bundle(ca.PEM())
	failed.Annotations = map[string]string{certificates.AnnotationCARotationStatus: certificates.ReasonCanaryFailed + ": CertificateOverdueForRefresh on apps/web"}
	if r := signerCARow(failed, now); !r.ready() || r.Reason != certificates.ReasonCanaryFailed || !strings.HasPrefix(r.Message, "CertificateOverdueForRefresh on apps/web (2 CAs") {
		t.Errorf("bundle of a failed canary: %+v", r)
	}
}

func TestPrintRows(t *testing.T) {
	jwksKind, _ := kindNamed("jwksconfig")
	clusterKind, _ := kindNamed("cluster")
	rows := []row{
		{Kind: jwksKind, Namespace: "a", Name: "ok", Ready: metav1.ConditionTrue, Reason: "Published", Created: time.Now().Add(-time.Hour), Facts: []string{"0123456789abcdefXYZ", "2", "<none>", "https://idp"}},
		{Kind: clusterKind, Namespace: "b", Name: "prod", Ready: metav1.ConditionFalse, Reason: "Provisioning", Created: time.Now().Add(-time.Minute), Facts: []string{"Provisioning", "c-1234567", "aws", "eu"}, Message: "creating\nthe shoot"},
	}
	sortRows(rows)
	if rows[0].Name != "prod" {
		t.Error("not-Ready rows go first")
	}
	var b bytes.Buffer
	if err := printRows(&b, rows[1:], outputTable, false, true); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "NAME   READY   REASON      KID             KEYS   AGE\nok     True    Published   0123456789ab…   2      60m\n") {
		t.Errorf("table:\n%s", got)
	}
	b.Reset()
	if err := printRows(&b, rows[1:], outputWide, false, true); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "0123456789abcdefXYZ") || !strings.Contains(got, "ISSUER") || !strings.Contains(got, "https://idp") {
		t.Errorf("wide:\n%s", got)
	}
	b.Reset()
	if err := printRows(&b, rows, outputWide, true, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAMESPACE   NAME") || !strings.Contains(lines[1], "cluster/prod") ||
		!strings.Contains(lines[1], "phase=Provisioning shoot=c-1234567") || !strings.HasSuffix(lines[1], "creating the shoot") {
		t.Errorf("several kinds:\n%s", b.String())
	}
	if err := notReady(rows); err == nil || err.Error() != "1 of 2 objects are not Ready" {
		t.Errorf("exit status: %v", err)
	}
	if err := checkOutput("xml"); err == nil {
		t.Error("-o xml accepted")
	}
}

func TestRenderTree(t *testing.T) {
	root := &node{Text: "Cluster a/b  Ready=True"}
	shoot := root.add("Shoot c-1 (in the Gardener project)")
	shoot.add("SubscriptionRequest a/b: Ready=True")
	reqs := root.add("KubeconfigRequests")
	reqs.add("KubeconfigRequest a/r1:\n  Ready=True")
	reqs.add("KubeconfigRequest a/r2")
	root.adopt(nil, eventsNode(nil, now))
	var b bytes.Buffer
	if err := renderTree(&b, root); err != nil {
		t.Fatal(err)
	}
	want := `Cluster a/b Ready=True
├─Shoot c-1 (in the Gardener project)
│ └─SubscriptionRequest a/b: Ready=True
├─KubeconfigRequests
│ ├─KubeconfigRequest a/r1: Ready=True
│ └─KubeconfigRequest a/r2
└─Events: none
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestIssuedKubeconfig(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://c.example"}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	issued := func(mutate func(*operatorv1alpha1.KubeconfigRequest)) *operatorv1alpha1.KubeconfigRequest {
		kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
			Status: operatorv1alpha1.KubeconfigRequestStatus{Conditions: ready(metav1.ConditionTrue, operatorv1alpha1.ReasonIssued),
				Kubeconfig: base64.StdEncoding.EncodeToString(raw), ExpirationTimestamp: &metav1.Time{Time: now.Add(time.Hour)}}}
		if mutate != nil {
			mutate(kr)
		}
		return kr
	}
	if got, err := issuedKubeconfig(issued(nil), now); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("issued: %v", err)
	}
	for want, mutate := range map[string]func(*operatorv1alpha1.KubeconfigRequest){
		"is revoked": func(kr *operatorv1alpha1.KubeconfigRequest) {
			kr.Annotations = map[string]string{operatorv1alpha1.RevokeAnnotation: "true"}
		},
		"is revoked (": func(kr *operatorv1alpha1.KubeconfigRequest) {
			kr.Status.Conditions = ready(metav1.ConditionFalse, operatorv1alpha1.ReasonRevoked)
		},
		"is not Ready: ClusterNotReady: said ClusterNotReady": func(kr *operatorv1alpha1.KubeconfigRequest) {
			kr.Status.Conditions = ready(metav1.ConditionFalse, operatorv1alpha1.ReasonClusterNotReady)
		},
		"not reconciled yet": func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Status.Conditions = nil },
		"the issued kubeconfig expired 60s ago": func(kr *operatorv1alpha1.KubeconfigRequest) {
			kr.Status.ExpirationTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
		},
		"has no kubeconfig":               func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Status.Kubeconfig = "" },
		"status.kubeconfig is not base64": func(kr *operatorv1alpha1.KubeconfigRequest) { kr.Status.Kubeconfig = "%%%" },
	} {
		if _, err := issuedKubeconfig(issued(mutate), now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

func TestCertificateBlocks(t *testing.T) {
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "x", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got, err := certificateBlocks("f", append(chain.KeyPEM(), chain.PEM()...))
	if err != nil || !bytes.Equal(got, chain.PEM()) {
		t.Errorf("key and chain: %v", err)
	}
	if _, err := certificateBlocks("f", chain.KeyPEM()); err == nil || err.Error() != "f holds no certificate (its PEM blocks: PRIVATE KEY)" {
		t.Errorf("key only: %v", err)
	}
	if _, err := certificateBlocks("f", []byte("hello")); err == nil || err.Error() != "f holds no PEM certificate" {
		t.Errorf("no PEM: %v", err)
	}
}

func TestTrackResult(t *testing.T) {
	for _, tc := range []struct {
		r    trackResult
		want []string
	}{
		{trackResult{Track: checksum.TrackSecrets, IDs: 2, Verdict: dataplane.Verdict{Trusted: true, Reason: dataplane.Match, Checksum: "abc", Against: "ns/secret-1"}},
			[]string{"Secrets: match: checksum abc of 2 IDs is published in SecretCheckSum ns/secret-1"}},
		{trackResult{Track: checksum.TrackIngresses, Verdict: dataplane.Verdict{Reason: dataplane.NoChecksumFailClosed, Checksum: "abc"}},
			[]string{"Ingresses: MISMATCH: no IngressCheckSum is published in this scope"}},
		{trackResult{Track: checksum.TrackSecrets, Verdict: dataplane.Verdict{Reason: dataplane.ScopeMismatch, Against: "x/y", AgainstScope: "namespaces=x; version-annotation=v"}},
			[]string{"no published SecretCheckSum covers this scope", `covers "namespaces=x; version-annotation=v"`}},
		{trackResult{Track: checksum.TrackSecrets, ObjectKind: "Secret", IDs: 1, Against: dataplane.Published{Checksum: "def", IDs: []string{"1-1-a"}},
			Verdict:     dataplane.Verdict{Reason: dataplane.Mismatch, Checksum: "abc", Against: "ns/secret-1"},
			Differences: []checksum.Difference{{ID: "1-2-a", Side: checksum.OnlyInCluster, Objects: []string{"ns/site-1"}, Why: "version 2 in the cluster, 1 published"}}},
			[]string{"Secrets: MISMATCH with SecretCheckSum ns/secret-1", "published def of 1 IDs", "ID      ONLY IN   SECRET      WHY", "1-2-a   cluster   ns/site-1   version 2 in the cluster, 1 published"}},
	} {
		var b bytes.Buffer
		if err := writeTrackResult(&b, tc.r, now); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("lacks %q:\n%s", w, b.String())
			}
		}
	}
}

func TestExamplesAsPlugin(t *testing.T) {
	defer func(args []string) { os.Args = args }(os.Args)
	os.Args = []string{"/usr/local/bin/kubectl-trustplane", "get"}
	got := examples("get -A", "# a comment", "kubectl get x | {tp} jwks inspect -")
	want := "  kubectl trustplane get -A\n  # a comment\n  kubectl get x | kubectl trustplane jwks inspect -"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	os.Args = []string{"./trustplane"}
	if got := examples("get -A"); got != "  trustplane get -A" {
		t.Errorf("as trustplane: %q", got)
	}
}
