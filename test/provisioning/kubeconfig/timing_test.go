package kubeconfig_test

// Tests of when the operator acts: rotation at two thirds of the lifetime on a fake
// clock, and a Gardener Cluster waited for until it is provisioned.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/clustertarget"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

// bumpVerbs changes the request's spec (its Role's verbs) so that it is reconciled and
// its observedGeneration shows when that happened; the rules stay within the ceiling.
func bumpVerbs(t *testing.T, name string) {
	t.Helper()
	update(t, ns, name, func(kr *operatorv1alpha1.KubeconfigRequest) {
		verbs := kr.Spec.Role.Rules[0].Verbs
		if len(verbs) == 1 {
			kr.Spec.Role.Rules[0].Verbs = append(verbs, "list")
		} else {
			kr.Spec.Role.Rules[0].Verbs = verbs[:1]
		}
	})
}

// TestRotationAtTwoThirdsOfTheLifetime: the controller reads time from its injected
// clock. Just before two thirds of the credential's lifetime a reconcile keeps it; at two
// thirds it issues a new one while the old one stays valid (until it expires, for
// consumers that have not read the new one yet).
func TestRotationAtTwoThirdsOfTheLifetime(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	clock := clocktesting.NewFakePassiveClock(t0)
	opts := kubeconfigctrl.DefaultOptions()
	opts.Clock = clock
	setupWith(t, opts, nil)
	createAll(t, roleRequest(ns, "rotating", "target"))
	kr := waitConditions(t, ns, "rotating", "Ready=True/Issued")
	first, issued, expires := kr.Status.Kubeconfig, kr.Status.IssuedAt.Time, kr.Status.ExpirationTimestamp.Time
	if !issued.Equal(t0) {
		t.Fatalf("issuedAt %v, want the injected clock's %v", issued, t0)
	}
	// The lifetime is the server's answer (here: the 3600 s asked for, in real time).
	rotateAt := issued.Add(expires.Sub(issued) * 2 / 3)
	if d := rotateAt.Sub(t0); d < 39*time.Minute || d > 41*time.Minute {
		t.Fatalf("rotation due %v after issue, want about 40 minutes (2/3 of 3600 s)", d)
	}

	clock.SetTime(rotateAt.Add(-time.Second))
	bumpVerbs(t, "rotating")
	kr = waitConditions(t, ns, "rotating", "Ready=True/Issued")
	if kr.Status.Kubeconfig != first || !kr.Status.IssuedAt.Time.Equal(t0) {
		t.Fatalf("rotated a second before two thirds of the lifetime (issuedAt %v)", kr.Status.IssuedAt)
	}

	clock.SetTime(rotateAt)
	bumpVerbs(t, "rotating")
	kr = waitConditions(t, ns, "rotating", "Ready=True/Issued")
	if kr.Status.Kubeconfig == first || !kr.Status.IssuedAt.Time.Equal(rotateAt.Truncate(time.Second)) {
		t.Fatalf("not rotated at two thirds of the lifetime: issuedAt %v, want %v", kr.Status.IssuedAt, rotateAt)
	}
	old := &operatorv1alpha1.KubeconfigRequest{Status: operatorv1alpha1.KubeconfigRequestStatus{Kubeconfig: first}}
	oldClient, newClient := clientFrom(t, old), clientFrom(t, kr)
	testenv.Eventually(t, "both the replaced and the new kubeconfig to get pods in team", 10*time.Second, func() bool {
		return canGetPods(t, oldClient) && canGetPods(t, newClient)
	})

	// The new credential is not rotated again before two thirds of its own lifetime
	// (the clock stands still: a requeue due now would show as another rotation).
	rotated := kr.Status.Kubeconfig
	time.Sleep(3 * time.Second)
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
		t.Fatal(err)
	}
	if kr.Status.Kubeconfig != rotated {
		t.Error("rotated again at once")
	}
}

// setupWith is setup with the controller's options and garden chosen by the test.
func setupWith(t *testing.T, opts kubeconfigctrl.Options, newGarden func(ctrl.Manager) (*garden.Garden, error)) {
	t.Helper()
	mgmt.RunManager(t, func(mgr ctrl.Manager) error {
		var g *garden.Garden
		if newGarden != nil {
			var err error
			if g, err = newGarden(mgr); err != nil {
				return err
			}
		}
		if err := clustertarget.AddIndexes(context.Background(), mgr); err != nil {
			return err
		}
		opts.Garden = g
		_, err := kubeconfigctrl.Setup(mgr, opts)
		return err
	})
	createTarget(t)
}

// fakeGarden answers shoots/adminkubeconfig with the target's admin kubeconfig, as
// Gardener answers with a short-lived one for a shoot; it counts the requests. Everything
// else goes to the target API server, which plays the garden too (with a Shoot CRD), so
// that the operator can read the Shoot it asks a kubeconfig for.
func fakeGarden(t *testing.T, project string, requests *atomic.Int32) *httptest.Server {
	t.Helper()
	return fakeGardenServing(t, project, requests, func() ([]byte, time.Time) {
		return target.Environment().KubeConfig, time.Now().Add(10 * time.Minute)
	})
}

// fakeGardenServing is fakeGarden answering with the admin kubeconfig, and its
// expiration, that admin gives at the time.
func fakeGardenServing(t *testing.T, project string, requests *atomic.Int32, admin func() ([]byte, time.Time)) *httptest.Server {
	t.Helper()
	installShootCRD.Do(func() {
		_, errInstall = envtest.InstallCRDs(target.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true,
			Paths: []string{filepath.Join("..", "..", "..", "internal", "provisioning", "subscription", "testdata", "shoots.yaml")}})
	})
	if errInstall != nil {
		t.Fatal(errInstall)
	}
	if err := target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: project}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(target.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	if upstream.Scheme == "" {
		upstream, _ = url.Parse("https://" + target.Config.Host)
	}
	transport, err := rest.TransportFor(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix := "/apis/" + shoot.GVK.Group + "/" + shoot.GVK.Version + "/namespaces/" + project + "/shoots/"
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, prefix) || !strings.HasSuffix(r.URL.Path, "/adminkubeconfig") {
			proxy.ServeHTTP(w, r)
			return
		}
		requests.Add(1)
		kubeconfig, expires := admin()
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{
			"kubeconfig": kubeconfig, "expirationTimestamp": expires.UTC().Format(time.RFC3339)}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

var (
	installShootCRD sync.Once
	errInstall      error
)

// createShoot puts a Shoot in the test garden's project, labelled as the Cluster
// controller labels the Shoot of Cluster clusterNS/clusterName.
func createShoot(t *testing.T, project, name, clusterNS, clusterName string) {
	t.Helper()
	s := garden.NewShoot()
	s.SetNamespace(project)
	s.SetName(name)
	s.SetLabels(map[string]string{operatorv1alpha1.ClusterNamespaceLabel: clusterNS, operatorv1alpha1.ClusterNameLabel: clusterName})
	s.Object["spec"] = map[string]any{}
	if err := target.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// markProvisioned stands in for the Cluster controller: status.shootName and
// ClusterProvisioned=True.
func markProvisioned(t *testing.T, cluster *operatorv1alpha1.Cluster, shootName string) {
	t.Helper()
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	cluster.Status.ShootName = shootName
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{Type: operatorv1alpha1.ConditionClusterProvisioned, Status: metav1.ConditionTrue,
		Reason: operatorv1alpha1.ReasonProvisioned, Message: "shoot created", ObservedGeneration: cluster.Generation})
	if err := mgmt.Client.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
}

// TestClusterNotReadyUntilTheClusterIsProvisioned: a request for a Gardener Cluster waits
// (Reconciling, reason ClusterNotReady, no call to the garden) until the Cluster reports
// ClusterProvisioned with its shoot; that change alone brings it back, and it is issued
// through the shoot's admin kubeconfig.
func TestClusterNotReadyUntilTheClusterIsProvisioned(t *testing.T) {
	const project = "garden-test"
	adminRequests := setupWithFakeGarden(t, project)
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gardened"}}
	createAll(t, cluster, roleRequest(ns, "early", "gardened"))
	kr := waitConditions(t, ns, "early", "Ready=False/ClusterNotReady", "Reconciling=True/ClusterNotReady")
	if c := meta.FindStatusCondition(kr.Status.Conditions, "Ready"); !strings.Contains(c.Message, "not provisioned yet") {
		t.Errorf("Ready message %q", c.Message)
	}
	if n := adminRequests.Load(); n != 0 {
		t.Errorf("%d admin kubeconfigs asked for a cluster not provisioned", n)
	}

	// The test stands in for the Cluster controller.
	createShoot(t, project, shoot.Name(ns, "gardened"), ns, "gardened")
	markProvisioned(t, cluster, shoot.Name(ns, "gardened"))
	kr = waitConditions(t, ns, "early", "Ready=True/Issued")
	if adminRequests.Load() == 0 {
		t.Error("issued without an admin kubeconfig from the garden")
	}
	kc := clientFrom(t, kr)
	testenv.Eventually(t, "the kubeconfig to get pods in team", 10*time.Second, func() bool { return canGetPods(t, kc) })
}

// setupWithFakeGarden runs the controller against a fake garden for project and returns
// the count of admin kubeconfigs it was asked for.
func setupWithFakeGarden(t *testing.T, project string) *atomic.Int32 {
	t.Helper()
	adminRequests := &atomic.Int32{}
	srv := fakeGarden(t, project, adminRequests)
	setupWithGarden(t, project, srv.URL)
	return adminRequests
}

// setupWithGarden runs the controller against the garden at url for project.
func setupWithGarden(t *testing.T, project, url string) {
	t.Helper()
	params := shoot.DefaultParams()
	params.Namespace = project
	setupWith(t, kubeconfigctrl.DefaultOptions(), func(mgr ctrl.Manager) (*garden.Garden, error) {
		return garden.New(mgr, &rest.Config{Host: url}, params, 10*time.Minute)
	})
}
