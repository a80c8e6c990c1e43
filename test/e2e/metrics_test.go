package e2e

import (
	"crypto/tls"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/monitoring"
)

// setMetrics are, by process, the name prefixes of the trustplane_* metric families its
// code sets (issue 22, item 9): all subcommands are one binary, and a family registered
// where nothing sets it is exported there for ever, at 0 (the manager used to show every
// trustplane_dataplane_* gauge).
var setMetrics = map[string][]string{
	"manager": {"trustplane_build_info", "trustplane_jwks_", "trustplane_checksum_", "trustplane_tls_secret_", "trustplane_object_",
		"trustplane_podcertificate_signer_", "trustplane_cluster_", "trustplane_kubeconfig_", "trustplane_subscription_", "trustplane_pool_"},
	"node-agent": {"trustplane_build_info", "trustplane_podcertificate_states"},
	"dataplane":  {"trustplane_build_info", "trustplane_dataplane_"},
}

// exported are the metric families (any name) the processes were seen to export, for
// testQueriedMetricsAreExported: the agents run in subtests and are gone by then.
var exported = struct {
	sync.Mutex
	families map[string]string // family → the process seen exporting it
}{families: map[string]string{}}

// checkOwnMetrics: every trustplane_* family in a process's /metrics is one that process
// sets, and want are there. It records every family for testQueriedMetricsAreExported.
func checkOwnMetrics(t *testing.T, process string, exposition []byte, want ...string) {
	t.Helper()
	exported.Lock()
	for _, family := range metricFamilies(exposition, "") {
		exported.families[family] = process
	}
	exported.Unlock()
	families := trustplaneFamilies(exposition)
	for _, family := range families {
		if !slices.ContainsFunc(setMetrics[process], func(prefix string) bool { return strings.HasPrefix(family, prefix) }) {
			t.Errorf("the %s exports %s, which it never sets", process, family)
		}
	}
	for _, w := range want {
		if !slices.Contains(families, w) {
			t.Errorf("the %s does not export %s; it exports %q", process, w, families)
		}
	}
}

// trustplaneFamilies are the trustplane_* families of a Prometheus text exposition.
func trustplaneFamilies(exposition []byte) []string { return metricFamilies(exposition, "trustplane_") }

// metricFamilies are the families of a Prometheus text exposition whose names start with
// prefix: a family with a TYPE line (a vector without any series has none).
func metricFamilies(exposition []byte, prefix string) []string {
	var out []string
	for _, line := range strings.Split(string(exposition), "\n") {
		if fields := strings.Fields(line); len(fields) == 4 && fields[1] == "TYPE" && strings.HasPrefix(fields[2], prefix) {
			out = append(out, fields[2])
		}
	}
	return out
}

// testQueriedMetricsAreExported: every metric an alert (config/prometheus) or a dashboard
// panel (config/grafana) reads is exported by one of the processes, as they ran with the
// objects of this test: a query of a metric nobody exports never fires, or shows nothing.
func testQueriedMetricsAreExported(t *testing.T) {
	queries, err := monitoring.Queries(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	exported.Lock()
	defer exported.Unlock()
	for _, process := range []string{"manager", "node-agent", "dataplane"} {
		if !slices.Contains(slices.Collect(maps.Values(exported.families)), process) {
			t.Fatalf("no /metrics of the %s was scraped", process)
		}
	}
	for _, q := range queries {
		names := monitoring.MetricNames(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s reads no metric: %s", q.Where, q.Expr)
		}
		for _, name := range names {
			if _, ok := exported.families[name]; !ok {
				t.Errorf("%s reads %s, which no process exports", q.Where, name)
			}
		}
	}
}

// scrape reads plain-HTTP /metrics at addr (an agent's), waiting for it to answer.
func scrape(t *testing.T, addr string) []byte {
	t.Helper()
	var body []byte
	testenv.Eventually(t, "/metrics at "+addr, 30*time.Second, func() bool {
		var ok bool
		body, ok = get(t, urlOf(addr, "/metrics"))
		return ok
	})
	return body
}

// scrapeSecure reads the manager's /metrics as the shipped manifests serve it: HTTPS
// (--metrics-secure), for a ServiceAccount bound to trustplane-metrics-reader.
func scrapeSecure(t *testing.T, addr string) []byte {
	t.Helper()
	token := metricsReaderToken(t)
	// The certificate is self-signed: who may read is what --metrics-secure checks.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var body []byte
	testenv.Eventually(t, "/metrics at "+addr, 30*time.Second, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return body
}

// metricsReaderToken is a token of a ServiceAccount bound to the shipped
// trustplane-metrics-reader ClusterRole, as a Prometheus would hold.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-scraper"}}
	// Made once, by whichever scrape comes first.
	for _, obj := range []client.Object{sa, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trustplane-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: managerNamespace, Name: sa.Name}}}} {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// testMakeRunNodeAgentMetrics: the node agent started with the args make run gives it
// (localcp.NodeAgentArgs: an admin kubeconfig, the sample Node) serves /metrics on the
// address make run prints, with the states of the Node's pod certificates.
func testMakeRunNodeAgentMetrics(t *testing.T, bin string) {
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: localcp.SampleNodeName}})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: podsNamespace, Name: "sample"}})
	create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: podsNamespace, Name: "sample", Annotations: map[string]string{nodeagent.SignerAnnotation: podSigner}},
		Spec:       corev1.PodSpec{NodeName: localcp.SampleNodeName, ServiceAccountName: "sample", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	})
	metricsAddr := testenv.FreeAddr(t)
	testenv.StartProcess(t, bin, localcp.NodeAgentArgs(env.AdminKubeconfig(t), t.TempDir(), metricsAddr, true)...)
	checkAgentMetrics(t, "node-agent", metricsAddr, "trustplane_podcertificate_states")
}

// checkAgentMetrics waits until an agent's plain-HTTP /metrics at addr exports want (set
// once the agent has done some work), then checks them with checkOwnMetrics.
func checkAgentMetrics(t *testing.T, process, addr string, want ...string) {
	t.Helper()
	var exposition []byte
	testenv.Eventually(t, "the "+process+" to export "+strings.Join(want, ", "), 60*time.Second, func() bool {
		exposition = scrape(t, addr)
		families := trustplaneFamilies(exposition)
		return !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(families, w) })
	})
	checkOwnMetrics(t, process, exposition, want...)
}
