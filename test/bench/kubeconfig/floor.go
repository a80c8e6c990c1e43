//go:build bench

package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/bench/benchfloor"
)

// floorNamespace holds the floor's KubeconfigRequests and published Secrets;
// warmUpNamespace those of the floor run that warms the API servers up (warmUpServers).
const (
	floorNamespace  = "floor"
	warmUpNamespace = "warm-up"
)

// floorTarget is the floor's connection to one Cluster: a client of its own per Cluster,
// as the manager has.
type floorTarget struct {
	name     string
	c        client.Client
	kube     kubernetes.Interface
	endpoint access.Endpoint
}

// The floor's controller is a process of its own, as the manager is: this bench's binary
// run again with -floor-count (test/bench/benchfloor).
var (
	floorCount      = flag.Int("floor-count", 0, "Run as the floor's controller, serving this many KubeconfigRequests of the floor namespace (the bench starts it; not for use by hand).")
	floorClusters   = flag.Int("floor-clusters", 1, "With -floor-count: the Clusters target-00, target-01, ... the requests name.")
	floorWorkersN   = flag.Int("floor-workers", 1, "With -floor-count: how many requests it serves at once.")
	floorNS         = flag.String("floor-namespace", floorNamespace, "With -floor-count: the namespace of the requests it serves.")
	floorKubeconfig = flag.String("floor-kubeconfig", "", "With -floor-count: the management cluster's kubeconfig.")
	floorTargetKube = flag.String("floor-target-kubeconfig", "", "With -floor-count: every Cluster's target API server's kubeconfig.")
)

// runFloor is the floor: n KubeconfigRequests created at once in namespace and timed to
// Ready exactly as the bench creates and times them for the manager (createAndWait), and
// served by a plain controller with no controller logic, a process of its own
// (runFloorController). It returns the time until all requests were Ready, each
// request's latency from its creation to its Ready, and the floor's controller's CPU
// seconds.
func runFloor(ctx context.Context, tb *testenv.Bench, target *testenv.Env, namespace string, n int, clusters []string, workers int) (time.Duration, []time.Duration, float64, error) {
	if err := tb.Env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return 0, nil, 0, err
	}
	targetKubeconfig := filepath.Join(tb.Dir, "target.kubeconfig")
	if err := os.WriteFile(targetKubeconfig, target.Environment().KubeConfig, 0o600); err != nil {
		return 0, nil, 0, err
	}
	proc, err := benchfloor.Start("-floor-count", strconv.Itoa(n), "-floor-clusters", strconv.Itoa(len(clusters)),
		"-floor-workers", strconv.Itoa(workers), "-floor-namespace", namespace, "-floor-kubeconfig", tb.Kubeconfig, "-floor-target-kubeconfig", targetKubeconfig)
	if err != nil {
		return 0, nil, 0, err
	}
	defer proc.Stop()
	total, latencies, err := createAndWait(ctx, tb.Env, namespace, n, clusters, proc.Failed())
	if err != nil {
		return 0, nil, 0, err
	}
	cpu, err := proc.Finish()
	return total, latencies, cpu, err
}

// warmUpServers serves n requests with the floor, unmeasured, in a namespace of its own,
// then deletes what that wrote, before the manager starts. The manager always runs first
// on a size's fresh API servers and the floor second: without this the manager alone met
// them cold (heaps still growing, caches filling). Runs of 200 from one binary: the
// manager's p50 1.23 to 1.48 times the floor's without the warm-up (three runs), 0.98 to
// 1.22 with it (six). The warm-up runs before the admission policies are installed, so
// its requests carry no finalizer: once deleted, nothing of them is left for the manager
// to reconcile or sweep.
func warmUpServers(ctx context.Context, tb *testenv.Bench, target *testenv.Env, n int, clusters []string) error {
	// The manager makes it as it first grants in a target; the floor takes it as made.
	if err := target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeconfigctrl.TargetNamespace}}); err != nil {
		return err
	}
	if _, _, _, err := runFloor(ctx, tb, target, warmUpNamespace, n, clusters, floorWorkers()); err != nil {
		return err
	}
	if err := tb.Env.Client.DeleteAllOf(ctx, &operatorv1alpha1.KubeconfigRequest{}, client.InNamespace(warmUpNamespace)); err != nil {
		return err
	}
	if err := tb.Env.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(warmUpNamespace)); err != nil {
		return err
	}
	written := client.HasLabels{kubeconfigctrl.RequestLabel}
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &corev1.Secret{}} {
		if err := target.Client.DeleteAllOf(ctx, obj, client.InNamespace(kubeconfigctrl.TargetNamespace), written); err != nil {
			return err
		}
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		if err := target.Client.DeleteAllOf(ctx, obj, written); err != nil {
			return err
		}
	}
	return nil
}

// runFloorController is the floor's controller: for each request its watch shows
// created, by -floor-workers goroutines (as many as the manager serves at once:
// floorWorkers), the writes serving one takes: in the target the ServiceAccount,
// ClusterRole and ClusterRoleBinding (at once, as the controller writes them), the token
// binding Secret and the TokenRequest; in the management cluster the published Secret and
// the status. Left out, being the controller's own bookkeeping, are its finalizer, its
// record of where it grants and its events. Like the manager, it has a connection of its
// own (its process's), a client of its own per Cluster, client-side rate limiting off,
// and watches the management cluster's Secrets (their metadata) as any controller
// publishing Secrets must. It exits once it has served -floor-count.
func runFloorController() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", *floorKubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	targetKubeconfig, err := os.ReadFile(*floorTargetKube)
	if err != nil {
		return err
	}
	targets := map[string]*floorTarget{}
	for i := range *floorClusters {
		name := fmt.Sprintf("target-%02d", i)
		tcfg, err := clientcmd.RESTConfigFromKubeConfig(targetKubeconfig)
		if err != nil {
			return err
		}
		tcfg.QPS = -1
		t := &floorTarget{name: name, endpoint: access.Endpoint{Server: tcfg.Host, CAData: tcfg.CAData}}
		if t.c, err = client.New(tcfg, client.Options{Scheme: scheme.New()}); err != nil {
			return err
		}
		if t.kube, err = kubernetes.NewForConfig(tcfg); err != nil {
			return err
		}
		targets[name] = t
	}
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	go testenv.DrainWatch(ctx, c, secrets, *floorNS)
	n := *floorCount
	queue := make(chan *operatorv1alpha1.KubeconfigRequest, n) // never full: the watch never waits for the workers
	failed := make(chan error, *floorWorkersN+1)
	feed, err := c.Watch(ctx, &operatorv1alpha1.KubeconfigRequestList{}, client.InNamespace(*floorNS))
	if err != nil {
		return err
	}
	go func() {
		if err := testenv.FeedCreated(ctx, c, feed, &operatorv1alpha1.KubeconfigRequestList{}, *floorNS, n, queue); err != nil {
			failed <- err
		}
	}()
	var workers sync.WaitGroup
	for range *floorWorkersN {
		workers.Go(func() {
			for kr := range queue {
				if err := serveFloor(ctx, c, targets[kr.Spec.Cluster], kr); err != nil {
					failed <- fmt.Errorf("%s: %w", kr.Name, err)
					return
				}
			}
		})
	}
	benchfloor.Ready()
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	select {
	case err := <-failed:
		return err
	case <-done:
		return nil
	}
}

// serveFloor writes what serving kr takes, as plain writes. Its objects in the target are
// named after kr's namespace and name, so that two floor runs' do not meet.
func serveFloor(ctx context.Context, c client.Client, t *floorTarget, kr *operatorv1alpha1.KubeconfigRequest) error {
	name := kr.Namespace + "-" + kr.Name
	labels := map[string]string{kubeconfigctrl.RequestLabel: name}
	ns := kubeconfigctrl.TargetNamespace
	var g errgroup.Group
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}},
	} {
		g.Go(func() error { return t.c.Create(ctx, obj) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	binding := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns, Labels: labels}}
	if err := t.c.Create(ctx, binding); err != nil {
		return err
	}
	tr, err := t.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(kr.Spec.Expiration),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: binding.Name, UID: binding.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	raw, err := access.Kubeconfig(t.name, t.endpoint, name, tr.Status.Token)
	if err != nil {
		return err
	}
	published := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kr.Name + "-kubeconfig", Namespace: kr.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kr, operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"))}},
		Data: map[string][]byte{"kubeconfig": raw}}
	if err := c.Create(ctx, published); err != nil {
		return err
	}
	patch := client.MergeFrom(kr.DeepCopy())
	now := metav1.Now()
	kr.Status.Kubeconfig = base64.StdEncoding.EncodeToString(raw)
	kr.Status.SecretName = published.Name
	kr.Status.ExpirationTimestamp = &metav1.Time{Time: tr.Status.ExpirationTimestamp.Time}
	kr.Status.IssuedAt = &now
	kr.Status.GrantedIn = &operatorv1alpha1.ClusterReference{Namespace: "default", Name: t.name}
	meta.SetStatusCondition(&kr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: operatorv1alpha1.ReasonIssued,
		Message: "kubeconfig for cluster " + t.name, ObservedGeneration: kr.Generation})
	return c.Status().Patch(ctx, kr, patch)
}
