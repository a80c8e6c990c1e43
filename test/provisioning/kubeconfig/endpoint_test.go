package kubeconfig_test

// Tests that an issued kubeconfig follows its target: when the server, or the CA bundle,
// the Cluster reaches its cluster with changes (make run's API server on a new port after
// a restart, say), the request issues a new kubeconfig for where the cluster now is.

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// targetKubeconfig is the target's admin kubeconfig with its cluster entries edited.
func targetKubeconfig(t *testing.T, edit func(*clientcmdapi.Cluster)) []byte {
	t.Helper()
	parsed, err := clientcmd.Load(target.Environment().KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parsed.Clusters {
		edit(c)
	}
	raw, err := clientcmd.Write(*parsed)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// atHost is the target's server URL with its host (not its port) replaced.
func atHost(t *testing.T, host string) func(*clientcmdapi.Cluster) {
	return func(c *clientcmdapi.Cluster) {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = host + ":" + u.Port()
		c.Server = u.String()
	}
}

// targetServer is the server URL of the target's admin kubeconfig, and its port.
func targetServer(t *testing.T) (server, port string) {
	t.Helper()
	targetKubeconfig(t, func(c *clientcmdapi.Cluster) { server = c.Server })
	u, err := url.Parse(server)
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("the target is at %s, not at 127.0.0.1 (%v)", server, err)
	}
	return server, u.Port()
}

// issuedEndpoint is the server and CA bundle of the kubeconfig the request publishes.
func issuedEndpoint(t *testing.T, kr *operatorv1alpha1.KubeconfigRequest) (server string, ca []byte) {
	t.Helper()
	cfg := issuedConfig(t, kr)
	return cfg.Host, cfg.CAData
}

// waitIssuedFor waits until the request is Ready with a kubeconfig for server that
// trusts ca (nil: any), and checks that it works.
func waitIssuedFor(t *testing.T, namespace, name, server string, ca []byte) *operatorv1alpha1.KubeconfigRequest {
	t.Helper()
	var kr *operatorv1alpha1.KubeconfigRequest
	testenv.Eventually(t, name+" issued for "+server, 30*time.Second, func() bool {
		kr = &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kr); err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(kr.Status.Conditions, "Ready") || kr.Status.Kubeconfig == "" {
			return false
		}
		host, issuedCA := issuedEndpoint(t, kr)
		return host == server && (ca == nil || string(issuedCA) == string(ca))
	})
	eventuallyGetsPods(t, "the kubeconfig for "+server, clientFrom(t, kr))
	return kr
}

// deletedAtTheEnd deletes the requests when the test ends, while its controller still
// runs, and waits until they are gone: what they hold in the target, which every test
// shares, goes with them.
func deletedAtTheEnd(t *testing.T, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, name := range names {
			kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := mgmt.Client.Delete(ctx, kr); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
			testenv.Eventually(t, name+" to go", 30*time.Second, func() bool {
				return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr))
			})
		}
	})
}

// normalEvents are the notes of the Normal events with reason about the object name.
func normalEvents(t *testing.T, namespace, name, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := mgmt.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeNormal {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// waitEvent waits for a Normal event with reason about name whose note contains want.
func waitEvent(t *testing.T, namespace, name, reason, want string) {
	t.Helper()
	testenv.Eventually(t, "a "+reason+" event saying "+want, 30*time.Second, func() bool {
		for _, note := range normalEvents(t, namespace, name, reason) {
			if strings.Contains(note, want) {
				return true
			}
		}
		return false
	})
}

// TestKubeconfigFollowsTheTargetsServerAndCA: the kubeconfig Secret of a brought-along
// Cluster is edited to reach the same API server as localhost instead of 127.0.0.1, then
// to trust a CA bundle with a second CA, then to point at a server that is not there, and
// back. Each change issues a new kubeconfig for where the cluster now is (with a Normal
// event naming the hosts, never the CA), which works; while a new one cannot be issued the
// request is not Ready.
func TestKubeconfigFollowsTheTargetsServerAndCA(t *testing.T) {
	setup(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving-admin"}, Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}
	createAll(t, secret, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "moving-admin"}}},
		roleRequest(ns, "follower", "moving"))
	deletedAtTheEnd(t, "follower")
	numeric, port := targetServer(t)
	named := "https://localhost:" + port
	first := waitIssuedFor(t, ns, "follower", numeric, target.Config.CAData)
	setKubeconfig := func(raw []byte) {
		t.Helper()
		secret.Data["kubeconfig"] = raw
		if err := mgmt.Client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}

	// Another name for the same server.
	setKubeconfig(targetKubeconfig(t, atHost(t, "localhost")))
	moved := waitIssuedFor(t, ns, "follower", named, target.Config.CAData)
	if moved.Status.Kubeconfig == first.Status.Kubeconfig {
		t.Fatal("the same kubeconfig")
	}
	waitEvent(t, ns, "follower", operatorv1alpha1.ReasonTargetChanged, "the server moved from 127.0.0.1:"+port+" to localhost:"+port)
	published := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: moved.Status.SecretName}, published); err != nil ||
		base64.StdEncoding.EncodeToString(published.Data["kubeconfig"]) != moved.Status.Kubeconfig {
		t.Errorf("the published Secret does not hold the new kubeconfig: %v", err)
	}

	// Another CA bundle that still verifies the server: the target's CA and a second one.
	other, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(other, "other.example", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte{}, target.Config.CAData...), testcerts.CertPEM(chain.CA)...)
	setKubeconfig(targetKubeconfig(t, func(c *clientcmdapi.Cluster) {
		atHost(t, "localhost")(c)
		c.CertificateAuthorityData = bundle
	}))
	waitIssuedFor(t, ns, "follower", named, bundle)
	waitEvent(t, ns, "follower", operatorv1alpha1.ReasonTargetChanged, "the CA bundle changed")
	for _, note := range normalEvents(t, ns, "follower", operatorv1alpha1.ReasonTargetChanged) {
		if strings.Contains(note, "BEGIN CERTIFICATE") || strings.Contains(note, "https://") {
			t.Errorf("event note %q tells more than the hosts", note)
		}
	}

	// A server that is not there: the published kubeconfig is not current, so not Ready.
	dead := testenv.FreeAddr(t)
	setKubeconfig(targetKubeconfig(t, func(c *clientcmdapi.Cluster) { c.Server = "https://" + dead }))
	kr := waitConditions(t, ns, "follower", "Ready=False/TargetUnreachable", "Reconciling=True/TargetUnreachable")
	if msg := meta.FindStatusCondition(kr.Status.Conditions, "Ready").Message; !strings.Contains(msg, "the server moved from localhost:"+port+" to "+dead) {
		t.Errorf("Ready message %q does not say that the server moved", msg)
	}
	if server, _ := issuedEndpoint(t, kr); server != named {
		t.Errorf("the kubeconfig for %s went while the new server cannot be reached (now for %q)", named, server)
	}

	// Back where it was.
	setKubeconfig(target.Environment().KubeConfig)
	waitIssuedFor(t, ns, "follower", numeric, target.Config.CAData)
}

// TestKubeconfigFollowsTheShootsAdminKubeconfig: a Gardener Cluster's admin kubeconfig
// names the shoot's API server by another name from one fetch to the next. The request
// whose reconcile fetched it issues a new kubeconfig, and so does every other request of
// the Cluster, which nothing else would bring back.
func TestKubeconfigFollowsTheShootsAdminKubeconfig(t *testing.T) {
	const project = "garden-moving"
	var served atomic.Value
	served.Store(target.Environment().KubeConfig)
	// Admin kubeconfigs that expire at once: every reconcile fetches a fresh one.
	srv := fakeGardenServing(t, project, &atomic.Int32{}, func() ([]byte, time.Time) { return served.Load().([]byte), time.Now() })
	setupWithGarden(t, project, srv.URL)
	cluster := &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gardened-moving"}}
	createAll(t, cluster, roleRequest(ns, "fetcher", "gardened-moving"), roleRequest(ns, "bystander", "gardened-moving"))
	deletedAtTheEnd(t, "fetcher", "bystander")
	createShoot(t, project, shoot.Name(ns, "gardened-moving"), ns, "gardened-moving")
	markProvisioned(t, cluster, shoot.Name(ns, "gardened-moving"))
	numeric, port := targetServer(t)
	waitIssuedFor(t, ns, "fetcher", numeric, nil)
	waitIssuedFor(t, ns, "bystander", numeric, nil)

	served.Store(targetKubeconfig(t, atHost(t, "localhost")))
	bumpVerbs(t, "fetcher") // its reconcile fetches the new admin kubeconfig
	waitIssuedFor(t, ns, "fetcher", "https://localhost:"+port, nil)
	waitIssuedFor(t, ns, "bystander", "https://localhost:"+port, nil)
	waitEvent(t, ns, "bystander", operatorv1alpha1.ReasonTargetChanged, "the server moved from 127.0.0.1:"+port+" to localhost:"+port)
}

// TestCredentialsIssuedInOneSecondKeepTheCurrentOne: credentials issued in quick
// succession (the target moving twice, rotations asked for one after the other) have
// token bindings that tie on their recorded expiry and creation time, both in seconds.
// Pruning the bindings after each issue never deletes the one just issued: every
// kubeconfig published works. The clock stands still, so every binding ties.
func TestCredentialsIssuedInOneSecondKeepTheCurrentOne(t *testing.T) {
	opts := kubeconfigctrl.DefaultOptions()
	opts.Clock = clocktesting.NewFakePassiveClock(time.Now())
	setupWith(t, opts, nil)
	createAll(t, roleRequest(ns, "hasty", "target"))
	deletedAtTheEnd(t, "hasty")
	kr := waitConditions(t, ns, "hasty", "Ready=True/Issued")
	for i := range 8 {
		previous := kr.Status.Kubeconfig
		patchAnnotation(t, "hasty", operatorv1alpha1.RotateAnnotation, "true")
		testenv.Eventually(t, fmt.Sprintf("rotation %d", i+1), 30*time.Second, func() bool {
			if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
				t.Fatal(err)
			}
			return kr.Status.Kubeconfig != previous && kr.Annotations[operatorv1alpha1.RotateAnnotation] == "false"
		})
		eventuallyGetsPods(t, fmt.Sprintf("the kubeconfig of rotation %d", i+1), clientFrom(t, kr))
	}
}
