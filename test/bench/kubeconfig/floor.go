//go:build bench

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// floorNamespace holds the floor's KubeconfigRequests and published Secrets.
const floorNamespace = "floor"

// floorTarget is the floor's connection to one Cluster: a client of its own per Cluster,
// as the manager has.
type floorTarget struct {
	name     string
	c        client.Client
	kube     kubernetes.Interface
	endpoint access.Endpoint
}

// runFloor is the floor: n KubeconfigRequests created at once, as the bench creates them
// for the manager, and for each, by workers goroutines (as many as the manager serves at
// once: floorWorkers) and with no controller logic, the writes serving one takes: in the target
// the ServiceAccount, ClusterRole and ClusterRoleBinding (at once, as the controller
// writes them), the token binding Secret and the TokenRequest; in the management cluster
// the published Secret and the status. Left out, being the controller's own bookkeeping,
// are its finalizer, its record of where it grants and its events. Client-side rate
// limiting is off, as in the manager. It returns the time until all statuses were
// written and each request's latency from its creation to its status written.
func runFloor(ctx context.Context, mgmt, target *testenv.Env, n, clusters, workers int) (time.Duration, []time.Duration, error) {
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return 0, nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}); err != nil {
		return 0, nil, err
	}
	targets := make([]*floorTarget, clusters)
	for i := range targets {
		tcfg, err := clientcmd.RESTConfigFromKubeConfig(target.Environment().KubeConfig)
		if err != nil {
			return 0, nil, err
		}
		tcfg.QPS = -1
		t := &floorTarget{name: fmt.Sprintf("target-%02d", i), endpoint: access.Endpoint{Server: tcfg.Host, CAData: tcfg.CAData}}
		if t.c, err = client.New(tcfg, client.Options{Scheme: scheme.New()}); err != nil {
			return 0, nil, err
		}
		if t.kube, err = kubernetes.NewForConfig(tcfg); err != nil {
			return 0, nil, err
		}
		targets[i] = t
	}

	type work struct {
		i       int
		kr      *operatorv1alpha1.KubeconfigRequest
		created time.Time
	}
	queue := make(chan work, n)
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	start := time.Now()
	var creates sync.WaitGroup
	for i := range n {
		creates.Add(1)
		go func() {
			defer creates.Done()
			t := targets[i%clusters]
			kr := request(floorNamespace, fmt.Sprintf("req-%05d", i), t.name)
			created := time.Now()
			if err := c.Create(ctx, kr); err != nil {
				errs <- err
				return
			}
			queue <- work{i: i, kr: kr, created: created}
		}()
	}
	go func() { creates.Wait(); close(queue) }()
	var served sync.WaitGroup
	for range workers {
		served.Add(1)
		go func() {
			defer served.Done()
			for w := range queue {
				if err := serveFloor(ctx, c, targets[w.i%clusters], w.kr); err != nil {
					errs <- fmt.Errorf("%s: %w", w.kr.Name, err)
					continue
				}
				lat[w.i] = time.Since(w.created)
			}
		}()
	}
	served.Wait()
	total := time.Since(start)
	select {
	case err := <-errs:
		return 0, nil, err
	default:
	}
	return total, lat, nil
}

// serveFloor writes what serving kr takes, as plain writes.
func serveFloor(ctx context.Context, c client.Client, t *floorTarget, kr *operatorv1alpha1.KubeconfigRequest) error {
	name := "floor-" + kr.Name
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
