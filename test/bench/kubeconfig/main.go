// Command kubeconfig is `make bench-kubeconfig`: 200 KubeconfigRequests created at once
// against one brought-along target cluster (two real API servers), after one warm-up
// request has shown the controller running and connected. It prints the time
// until all are Ready, the per-request latency from creation to Ready (p50, p99, observed
// through a watch), and the API requests per KubeconfigRequest on both API servers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/clustertarget"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/controller/kubeconfig"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

var requests = flag.Int("requests", 200, "KubeconfigRequests created at once.")

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-kubeconfig:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if os.Getenv("BENCH_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	}
	mgmt, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = mgmt.Stop() }()
	target, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = target.Stop() }()
	c := mgmt.Client
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "target-admin"},
		Data: map[string][]byte{"kubeconfig": target.Environment().KubeConfig}}); err != nil {
		return err
	}
	if err := c.Create(ctx, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "target"},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "target-admin"}}}); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return err
	}
	if err := clustertarget.AddIndexes(ctx, mgr); err != nil {
		return err
	}
	if _, err := kubeconfigctrl.Setup(mgr, kubeconfigctrl.DefaultOptions()); err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		return fmt.Errorf("cache did not sync")
	}

	// One request first, so that the measurement starts with the controller running and
	// connected to the target, as in a running operator, not with the manager starting up.
	if err := warmUp(ctx, c); err != nil {
		return err
	}

	before := requestsServed(ctx, mgmt) + requestsServed(ctx, target)
	wc, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	watcher, err := wc.Watch(ctx, &operatorv1alpha1.KubeconfigRequestList{}, client.InNamespace("default"))
	if err != nil {
		return err
	}
	defer watcher.Stop()

	created := make([]time.Time, *requests)
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for i := range *requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("req-%03d", i)},
				Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
					ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}}}
			t := time.Now()
			if err := c.Create(ctx, kr); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			mu.Lock()
			created[i] = t
			mu.Unlock()
		}()
	}
	wg.Wait()
	ready := map[string]time.Duration{}
	deadline := time.After(2 * time.Minute)
	for len(ready) < *requests {
		select {
		case ev, open := <-watcher.ResultChan():
			if !open { // the API server ended the watch: catch up by listing, then watch again
				list := &operatorv1alpha1.KubeconfigRequestList{}
				if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
					return err
				}
				for i := range list.Items {
					markReady(&list.Items[i], ready, created, &mu)
				}
				if watcher, err = wc.Watch(ctx, &operatorv1alpha1.KubeconfigRequestList{}, client.InNamespace("default"),
					&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
					return err
				}
				continue
			}
			if kr, ok := ev.Object.(*operatorv1alpha1.KubeconfigRequest); ok {
				markReady(kr, ready, created, &mu)
			}
		case <-deadline:
			return fmt.Errorf("only %d of %d Ready", len(ready), *requests)
		}
	}
	total := time.Since(start)
	time.Sleep(time.Second) // let trailing requests land before counting
	calls := requestsServed(ctx, mgmt) + requestsServed(ctx, target) - before
	var lat []time.Duration
	for _, d := range ready {
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1)+0.5)].Round(time.Millisecond) }
	fmt.Printf("bench-kubeconfig: %d KubeconfigRequests at once, one target: all Ready after %.2f s; per request p50 %v, p99 %v (target p99 < 2 s); %.1f API requests per KubeconfigRequest (both API servers, all verbs, the bench's own creates and watch included)\n",
		*requests, total.Seconds(), p(0.5), p(0.99), float64(calls)/float64(*requests))
	return nil
}

func warmUp(ctx context.Context, c client.Client) error {
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "warm-up"},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: "target", Expiration: 3600,
			ClusterRole: &operatorv1alpha1.ClusterRoleSpec{Rules: []operatorv1alpha1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}}
	if err := c.Create(ctx, kr); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(kr.Status.Conditions, "Ready") {
			return nil
		}
	}
	return fmt.Errorf("the warm-up KubeconfigRequest did not become Ready")
}

func markReady(kr *operatorv1alpha1.KubeconfigRequest, ready map[string]time.Duration, created []time.Time, mu *sync.Mutex) {
	if !meta.IsStatusConditionTrue(kr.Status.Conditions, "Ready") {
		return
	}
	if _, seen := ready[kr.Name]; !seen && strings.HasPrefix(kr.Name, "req-") {
		i, _ := strconv.Atoi(strings.TrimPrefix(kr.Name, "req-"))
		mu.Lock()
		ready[kr.Name] = time.Since(created[i])
		mu.Unlock()
	}
}

// requestsServed is every request the API server answered.
func requestsServed(ctx context.Context, env *testenv.Env) int {
	n, err := testenv.APIRequests(ctx, env.Config, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "counting API requests:", err)
	}
	return n
}
