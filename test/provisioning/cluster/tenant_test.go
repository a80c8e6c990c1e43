package cluster_test

// Issue 17: a tenant cannot make trustplane act beyond the tenant's own rights through a
// brought-along Cluster: its kubeconfig is sanitized, its server's answers do not reach
// the status, and its dead servers neither hold other tenants' Clusters nor its own
// deletion.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

// secretMarker stands for whatever an internal endpoint answers that a tenant must not
// read through the manager.
const secretMarker = "INTERNAL-ONLY-4b1d9c"

// runClusterController starts only the Cluster controller, with opts, and makes a fresh
// namespace the running test's ns.
func runClusterController(t testing.TB, opts clusterctrl.Options) {
	t.Helper()
	ns = mgmt.Namespace(t, "tenant")
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		_, err := clusterctrl.Setup(mgr, opts)
		return err
	})
}

// broughtAlong creates a Secret with kubeconfig and a Cluster using it in namespace.
func broughtAlong(t testing.TB, namespace, name string, kubeconfig []byte) *operatorv1alpha1.Cluster {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	if err := mgmt.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: secret.Name}, Administrators: []string{name + "@example.com"}}}
	if err := mgmt.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// tenantKubeconfig is a kubeconfig for server with a token; user adds lines to the user.
func tenantKubeconfig(server, user string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: t
contexts:
- name: t
  context: {cluster: t, user: t}
clusters:
- name: t
  cluster:
    server: %s
users:
- name: t
  user:
%s
`, server, user)
}

// clusterCondition is the named condition of a Cluster in namespace, nil when absent.
func clusterCondition(t testing.TB, namespace, name, condition string) *metav1.Condition {
	t.Helper()
	c := &operatorv1alpha1.Cluster{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(c.Status.Conditions, condition)
}

func clusterWarnings(t *testing.T, namespace, name, reason string) []eventsv1.Event {
	return testenv.WarningEvents(t, mgmt.Client, namespace, name, reason)
}

// fastRetries keeps the tests' backoff short; everything else is the default.
func fastRetries() clusterctrl.Options {
	opts := clusterctrl.DefaultOptions()
	opts.RetryBaseDelay = 50 * time.Millisecond
	opts.RetryMaxDelay = time.Second
	return opts
}

// An exec plugin in a tenant's kubeconfig never runs in the manager: the Cluster stalls
// with InsecureKubeconfig naming the field, and a Warning event says so.
func TestExecKubeconfigIsRefusedAndNeverRuns(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "plugin-ran")
	// Checked last, after the manager stopped, however the test ends.
	t.Cleanup(func() {
		if _, err := os.Stat(ran); !os.IsNotExist(err) {
			t.Errorf("the exec plugin ran in the manager (%s: %v)", ran, err)
		}
	})
	runClusterController(t, fastRetries())
	kc := tenantKubeconfig(shootEnv.Config.Host, fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'"]
      interactiveMode: Never`, ran))
	broughtAlong(t, ns, "exec", kc)
	cond := waitCondition(t, "exec", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInsecureKubeconfig)
	if !strings.Contains(cond.Message, "users[0].user.exec") {
		t.Errorf("message %q does not name users[0].user.exec", cond.Message)
	}
	testenv.Eventually(t, "an InsecureKubeconfig Warning event", 30*time.Second, func() bool {
		return len(clusterWarnings(t, ns, "exec", operatorv1alpha1.ReasonInsecureKubeconfig)) > 0
	})
	if ready := clusterCondition(t, ns, "exec", conditions.Ready); ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v, want False", ready)
	}
}

// A tokenFile naming the manager's own token (here: a file with a token in it) is
// refused before anything is sent: the tenant's listener never hears from the manager.
func TestTokenFileIsRefusedAndNothingIsSent(t *testing.T) {
	var requests atomic.Int32
	var seenToken atomic.Value
	// Checked last, after the manager stopped, however the test ends.
	t.Cleanup(func() {
		if n := requests.Load(); n != 0 {
			t.Errorf("the tenant's listener got %d requests (Authorization %q)", n, seenToken.Load())
		}
	})
	runClusterController(t, fastRetries())
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		seenToken.Store(r.Header.Get("Authorization"))
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(listener.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("the-managers-own-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	broughtAlong(t, ns, "steal", tenantKubeconfig(listener.URL, "    tokenFile: "+tokenFile))
	cond := waitCondition(t, "steal", conditions.Stalled, metav1.ConditionTrue, operatorv1alpha1.ReasonInsecureKubeconfig)
	if !strings.Contains(cond.Message, "users[0].user.tokenFile") {
		t.Errorf("message %q does not name users[0].user.tokenFile", cond.Message)
	}
}

// What a tenant-chosen server answers never reaches the Cluster's status or events: only
// the class of failure and the host do, for Status and non-Status answers alike.
func TestTargetAnswersStayOutOfStatus(t *testing.T) {
	runClusterController(t, fastRetries())
	var mode atomic.Value
	mode.Store("500")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch mode.Load() {
		case "500":
			http.Error(w, "<html>"+secretMarker+"</html>", http.StatusInternalServerError)
		case "200":
			w.Header().Set("Content-Type", "text/html")
			_, _ = fmt.Fprint(w, "<html><body>"+secretMarker+"</body></html>")
		case "403":
			gardenstandin.WriteStatus(w, http.StatusForbidden, "Forbidden", secretMarker)
		}
	}))
	t.Cleanup(target.Close)
	host := strings.TrimPrefix(target.URL, "http://")
	broughtAlong(t, ns, "internal", tenantKubeconfig(target.URL, "    token: tenant-token"))

	waitMessage := func(reason, want string) {
		t.Helper()
		var last *metav1.Condition
		testenv.Eventually(t, fmt.Sprintf("%s saying %q", reason, want), 30*time.Second, func() bool {
			last = clusterCondition(t, ns, "internal", conditions.Ready)
			return last != nil && last.Reason == reason && strings.Contains(last.Message, want)
		})
		if !strings.Contains(last.Message, host) {
			t.Errorf("message %q does not name the host %s", last.Message, host)
		}
	}
	waitMessage(operatorv1alpha1.ReasonClusterUnreachable, "HTTP 500")
	mode.Store("200")
	waitMessage(operatorv1alpha1.ReasonClusterUnreachable, "not a Kubernetes API answer")
	mode.Store("403")
	waitMessage(operatorv1alpha1.ReasonClusterAccessDenied, "(403)")

	c := getCluster(t, "internal")
	for _, cond := range c.Status.Conditions {
		if strings.Contains(cond.Message, secretMarker) {
			t.Errorf("condition %s quotes the server's answer: %q", cond.Type, cond.Message)
		}
	}
	list := &eventsv1.EventList{}
	if err := mgmt.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if strings.Contains(e.Note, secretMarker) {
			t.Errorf("event %s quotes the server's answer: %q", e.Reason, e.Note)
		}
	}
}

// blackhole accepts connections and never answers; it counts them.
type blackhole struct {
	net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newBlackhole(t testing.TB) *blackhole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{Listener: l}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, conn)
			b.mu.Unlock()
		}
	}()
	// Registered after the manager: runs before its stop, so no reconcile waits on it.
	t.Cleanup(func() {
		_ = l.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			_ = c.Close()
		}
	})
	return b
}

// Eight Clusters of one tenant at a server that accepts and never answers do not hold
// another tenant's Cluster: it becomes Ready while all of the first tenant's attempts
// are still hanging (none has even timed out), and no more of them hang at once than
// --cluster-workers-per-namespace allows.
func TestDeadTargetsDoNotHoldOtherTenants(t *testing.T) {
	opts := fastRetries()
	// Long enough that no blackholed attempt ends during the test: what is asserted is
	// the order of events, not how long anything took.
	opts.Kubeconfig.Timeout = 10 * time.Minute
	runClusterController(t, opts)
	hole := newBlackhole(t)
	alice := ns
	for i := range 8 {
		broughtAlong(t, alice, fmt.Sprintf("dead-%d", i), tenantKubeconfig("http://"+hole.Addr().String(), "    token: alice"))
	}
	testenv.Eventually(t, "alice's Clusters to hold their namespace's slots", 30*time.Second, func() bool {
		return hole.accepted.Load() >= int32(opts.WorkersPerNamespace)
	})

	bob := mgmt.Namespace(t, "bob")
	broughtAlong(t, bob, "healthy", shootEnv.Environment().KubeConfig)
	testenv.Eventually(t, "bob's Cluster to be Ready", 30*time.Second, func() bool {
		ready := clusterCondition(t, bob, "healthy", conditions.Ready)
		return ready != nil && ready.Status == metav1.ConditionTrue
	})
	if n := hole.accepted.Load(); n != int32(opts.WorkersPerNamespace) {
		t.Errorf("%d of alice's attempts hang at once, want %d (--cluster-workers-per-namespace)", n, opts.WorkersPerNamespace)
	}
	for i := range 8 {
		name := fmt.Sprintf("dead-%d", i)
		if c := clusterCondition(t, alice, name, conditions.Ready); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("%s is Ready at a server that never answers", name)
		}
		if c := clusterCondition(t, alice, name, conditions.Reconciling); c != nil && c.Reason == operatorv1alpha1.ReasonClusterUnreachable {
			t.Errorf("%s finished an attempt before bob's Cluster was served: %s", name, c.Message)
		}
	}
}

// A Cluster whose cluster is gone is deleted after the bounded cleanup attempt, with a
// Warning event saying what was left behind.
func TestClusterAtDeadTargetIsDeleted(t *testing.T) {
	opts := fastRetries()
	opts.DeletionCleanupTimeout = 0 // give up after the first failed attempt
	runClusterController(t, opts)
	dead := newBlackhole(t)
	addr := dead.Addr().String()
	_ = dead.Close() // nothing listens there any more: connections are refused
	c := broughtAlong(t, ns, "orphan", tenantKubeconfig("http://"+addr, "    token: x"))
	waitCondition(t, "orphan", conditions.Reconciling, metav1.ConditionTrue, operatorv1alpha1.ReasonClusterUnreachable)
	if err := mgmt.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Cluster at a dead target to go", 30*time.Second, gone(mgmt.Client, c))
	events := clusterWarnings(t, ns, "orphan", operatorv1alpha1.ReasonCleanupAbandoned)
	if len(events) == 0 {
		t.Fatal("no CleanupAbandoned Warning event")
	}
	if note := events[0].Note; !strings.Contains(note, "cluster-admin bindings") || !strings.Contains(note, addr) || !strings.Contains(note, "unreachable") {
		t.Errorf("event %q does not say what was left where and why", note)
	}
}

// BenchmarkHealthyClusterBesideDeadTargets reports how long a Cluster takes to become Ready
// (ns/op) while eight Clusters of another namespace hang at a server that never answers,
// and how many of their attempts hang at once.
func BenchmarkHealthyClusterBesideDeadTargets(b *testing.B) {
	opts := fastRetries()
	opts.Kubeconfig.Timeout = 10 * time.Minute
	runClusterController(b, opts)
	hole := newBlackhole(b)
	for i := range 8 {
		broughtAlong(b, ns, fmt.Sprintf("dead-%d", i), tenantKubeconfig("http://"+hole.Addr().String(), "    token: alice"))
	}
	testenv.Eventually(b, "the dead Clusters to hang", 30*time.Second, func() bool { return hole.accepted.Load() >= int32(opts.WorkersPerNamespace) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		other := mgmt.Namespace(b, "other")
		broughtAlong(b, other, "healthy", shootEnv.Environment().KubeConfig)
		testenv.Eventually(b, "the healthy Cluster to be Ready", 60*time.Second, func() bool {
			ready := clusterCondition(b, other, "healthy", conditions.Ready)
			return ready != nil && ready.Status == metav1.ConditionTrue
		})
	}
	b.ReportMetric(float64(hole.accepted.Load()), "hung-attempts")
}
