package dataplane_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/checksum/secretchecksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

const publishNamespace = "trustplane-system"

// TestClassesAndScopesAsRun runs `trustplane manager` (its secret-checksum controller) and
// `trustplane dataplane`, built from ./cmd/trustplane, over every namespace with both
// scopes published — as an all-namespaces Tengine-Ingress beside per-namespace ones is
// served:
//
//   - on a fresh cluster, the cluster-scope checksums exist at once, over nothing;
//   - the IngressCheckSum counts exactly the Ingresses a Tengine-Ingress with the same
//     class flags keeps (Ingresses of class nginx, tengine, none; IngressClasses of each
//     controller; a default IngressClass), and the agent with Tengine's own flag names
//     agrees;
//   - when the agent disagrees, its diff is against the object of its own scope, though a
//     per-namespace object is newer.
func TestClassesAndScopesAsRun(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	createNamespaces(t, env.Client, publishNamespace, "shop", "blog")
	bin, kubeconfig := testenv.Binary(t), env.AdminKubeconfig(t)

	// Tengine-Ingress started with --watch-ingress-without-class, the other class flags at
	// their defaults: the manager and the agent are told the same.
	stopManager := startManagerProcess(t, bin, kubeconfig, "--secret-checksum-watch-ingress-without-class")
	empty := checksum.Sum(nil)
	testenv.Eventually(t, "both cluster-scope checksums over nothing on a fresh cluster", 20*time.Second, func() bool {
		return clusterChecksum(t, env.Client, &tenginev1.SecretCheckSumList{}) == empty &&
			clusterChecksum(t, env.Client, &tenginev1.IngressCheckSumList{}) == empty
	})

	secretIDs := map[string]string{}
	for i, ns := range []string{"shop", "blog"} {
		for j := range 2 {
			name := fmt.Sprintf("site-%d", 10*(i+1)+j)
			c := cert(t)
			putSecretData(t, env.Client, ns, name, "1", map[string][]byte{corev1.TLSCertKey: c.PEM(), corev1.TLSPrivateKeyKey: c.KeyPEM()})
			secretIDs[ns+"/"+name] = fmt.Sprintf("%d-1-%s", 10*(i+1)+j, pemSHA(t, c))
		}
	}
	want := putClassedIngresses(t, env.Client, "shop", 10)
	want = append(want, putClassedIngresses(t, env.Client, "blog", 20)...)
	slices.Sort(want)
	testenv.Eventually(t, "the cluster IngressCheckSum over Tengine's Ingresses "+strings.Join(want, ","), 20*time.Second, func() bool {
		list := &tenginev1.IngressCheckSumList{}
		return clusterObject(t, env.Client, list) != nil && slices.Equal(list.Items[0].Spec.IDs, want)
	})

	metricsAddr := testenv.FreeAddr(t)
	agent := startAgentProcess(t, bin, kubeconfig, metricsAddr, "--watch-ingress-without-class")
	testenv.Eventually(t, "the agent agrees on both tracks", 30*time.Second, func() bool {
		return scrape(t, metricsAddr, `trustplane_dataplane_consistent{track="ingresses"}`) == 1 &&
			scrape(t, metricsAddr, `trustplane_dataplane_consistent{track="secrets"}`) == 1
	})

	// A per-namespace object newer than the cluster one: shop's, published again.
	cluster := clusterObject(t, env.Client, &tenginev1.SecretCheckSumList{})
	time.Sleep(1100 * time.Millisecond) // creation timestamps have whole seconds
	republishNamespaceScope(t, env.Client, "shop")
	stopManager()

	// blog's site-20 rotates while the manager is away: the agent reports exactly it.
	rotated := cert(t)
	putSecretData(t, env.Client, "blog", "site-20", "2", map[string][]byte{corev1.TLSCertKey: rotated.PEM(), corev1.TLSPrivateKeyKey: rotated.KeyPEM()})
	localOnly, publishedOnly := "20-2-"+pemSHA(t, rotated), secretIDs["blog/site-20"]
	var note string
	testenv.Eventually(t, "a ChecksumMismatch against the cluster object", 30*time.Second, func() bool {
		for _, e := range eventsOf(t, env.Client, publishNamespace, "ChecksumMismatch") {
			if e.Regarding.Name == cluster.GetName() && strings.HasPrefix(e.Note, "secrets") {
				note = e.Note
				return true
			}
		}
		return false
	})
	wantNote := fmt.Sprintf("only local: [%s]; only in %s/%s: [%s]", localOnly, publishNamespace, cluster.GetName(), publishedOnly)
	if !strings.Contains(note, wantNote) {
		t.Errorf("the diff names other IDs:\n got %s\nwant …%s", note, wantNote)
	}
	if n := len(eventsOf(t, env.Client, "shop", "ChecksumMismatch")); n != 0 {
		t.Errorf("%d ChecksumMismatch events against shop's per-namespace object", n)
	}
	if scrape(t, metricsAddr, `trustplane_dataplane_mismatch_ids{side="local_only",track="secrets"}`) != 1 ||
		scrape(t, metricsAddr, `trustplane_dataplane_mismatch_ids{side="published_only",track="secrets"}`) != 1 {
		t.Errorf("mismatch metrics:\n%s", agent.Output())
	}
}

// putClassedIngresses stores one versioned Ingress per class case in ns, IDs from base+1,
// and returns the IDs a Tengine-Ingress with --watch-ingress-without-class keeps.
func putClassedIngresses(t *testing.T, cl client.Client, ns string, base int) []string {
	t.Helper()
	for name, controller := range map[string]string{"tengine": checksum.DefaultControllerClass, "nginx": "k8s.io/ingress-nginx"} {
		ensureIngressClass(t, cl, name, controller, false)
	}
	id := func(n int) string { return strconv.Itoa(base+n) + "-1" }
	put := func(n int, what string, className *string, class string) *networkingv1.Ingress {
		annotations := map[string]string{checksum.DefaultVersionAnnotation: "1"}
		if class != "" {
			annotations[checksum.IngressClassAnnotation] = class
		}
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", what, base+n), Annotations: annotations},
			Spec: networkingv1.IngressSpec{IngressClassName: className,
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		if err := cl.Create(ctx, ing); err != nil {
			t.Fatal(err)
		}
		return ing
	}
	named := func(s string) *string { return &s }
	put(1, "annotated-tengine", nil, "tengine")
	put(2, "annotated-nginx", nil, "nginx")
	put(3, "classless", nil, "")
	put(4, "class-tengine", named("tengine"), "")
	put(5, "class-nginx", named("nginx"), "")
	put(6, "class-missing", named("nosuch"), "")
	// A default IngressClass of Tengine's controller: the API server names it in
	// Ingresses created without a class from now on.
	ensureIngressClass(t, cl, "tengine-default", checksum.DefaultControllerClass, true)
	testenv.Eventually(t, "the API server's admission to see the default IngressClass", 20*time.Second, func() bool {
		probe := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if err := cl.Create(ctx, probe, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		return probe.Spec.IngressClassName != nil && *probe.Spec.IngressClassName == "tengine-default"
	})
	if got := put(7, "defaulted", nil, "").Spec.IngressClassName; got == nil || *got != "tengine-default" {
		t.Fatalf("a classless Ingress got class %v, want the default", got)
	}
	return []string{id(1), id(3), id(4), id(7)}
}

func ensureIngressClass(t *testing.T, cl client.Client, name, controller string, isDefault bool) {
	t.Helper()
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		class.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	if err := cl.Create(ctx, class); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func startManagerProcess(t *testing.T, bin, kubeconfig string, flags ...string) (stop func()) {
	t.Helper()
	probes := testenv.FreeAddr(t)
	args := append([]string{"manager", "--controllers=" + secretchecksum.Name, "--leader-elect=false", "--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=" + probes,
		"--secret-checksum-scopes=cluster,namespace", "--secret-checksum-publish-namespace=" + publishNamespace,
		"--secret-checksum-quiet-period=200ms"}, flags...)
	p := testenv.StartProcess(t, bin, args...)
	p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
	return func() {
		if _, err := p.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	}
}

// startAgentProcess runs the agent over every namespace, as an all-namespaces
// Tengine-Ingress sees them.
func startAgentProcess(t *testing.T, bin, kubeconfig, metricsAddr string, flags ...string) *testenv.Process {
	t.Helper()
	probes := testenv.FreeAddr(t)
	args := append([]string{"dataplane", "--dir=" + t.TempDir(), "--kubeconfig=" + kubeconfig, "--quiet-period=100ms",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + probes}, flags...)
	p := testenv.StartProcess(t, bin, args...)
	p.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)
	return p
}

// clusterObject is the one cluster-scope checksum object of a kind (list filled in), or
// nil while there is not exactly one.
func clusterObject(t *testing.T, cl client.Client, list client.ObjectList) client.Object {
	t.Helper()
	if err := cl.List(ctx, list, client.InNamespace(publishNamespace), client.MatchingLabels{secretchecksum.ScopeKindLabel: "cluster"}); err != nil {
		t.Fatal(err)
	}
	switch l := list.(type) {
	case *tenginev1.SecretCheckSumList:
		if len(l.Items) == 1 {
			return &l.Items[0]
		}
	case *tenginev1.IngressCheckSumList:
		if len(l.Items) == 1 {
			return &l.Items[0]
		}
	}
	return nil
}

// clusterChecksum is the checksum of the one cluster-scope object of a kind, "" if none.
func clusterChecksum(t *testing.T, cl client.Client, list client.ObjectList) string {
	t.Helper()
	switch o := clusterObject(t, cl, list).(type) {
	case *tenginev1.SecretCheckSum:
		return o.Spec.Checksum
	case *tenginev1.IngressCheckSum:
		return o.Spec.Checksum
	}
	return ""
}

// republishNamespaceScope deletes ns's per-namespace SecretCheckSum; the manager publishes
// it again, newer than everything else.
func republishNamespaceScope(t *testing.T, cl client.Client, ns string) {
	t.Helper()
	list := &tenginev1.SecretCheckSumList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("%s's SecretCheckSums: %v, %v", ns, list.Items, err)
	}
	old := list.Items[0]
	if err := cl.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ns+"'s checksum published again", 20*time.Second, func() bool {
		if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(list.Items) == 1 && list.Items[0].UID != old.UID
	})
}

// scrape reads one sample of a process's /metrics, -1 when absent.
func scrape(t *testing.T, addr, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // a test's loopback scrape
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if value, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}
