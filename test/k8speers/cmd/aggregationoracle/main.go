// Command aggregationoracle prints what kube-controller-manager's ClusterRole aggregation
// controller (k8s.io/kubernetes/pkg/controller/clusterroleaggregation, v1.37.1, the
// version this module requires) writes for a set of ClusterRoles: the oracle of the chaos
// suite's aggregation invariant (test/chaos/aggregation.go), run as a process because
// trustplane's own module does not require k8s.io/kubernetes.
//
// It reads ClusterRoles as JSON on stdin (a list object with "items", as `kubectl get
// clusterroles -o json` prints, or a bare array) and prints a JSON array, in input order,
// with one entry per ClusterRole that has an aggregationRule:
//
//	{"name": "admin", "rules": [...]}     the rules the controller's sync applies
//	{"name": "broken", "error": "..."}    the error its sync returned (a bad selector)
//
// Nothing here computes rules: for each aggregating ClusterRole X it runs upstream's
// controller itself (NewClusterRoleAggregation, Run: its informer event handlers, queue,
// workers and syncClusterRole) on a fake clientset holding the input, and takes the rules
// of the server-side apply that sync sends for X. So that the sync always sends one, X's
// own rules are replaced, in X's copy of the world only, by two copies of one rule: the
// sync's list never holds a rule twice, so it never finds X up to date (and X's own rules
// never count for X: the sync skips X among its sources by name). Other roles keep their
// rules, so an aggregated source contributes its current rules, as in a cluster.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
)

// Result is what kube-controller-manager's sync does with one aggregating ClusterRole.
type Result struct {
	Name string `json:"name"`
	// Rules are the rules it applies (never null: [] for none).
	Rules []rbacv1.PolicyRule `json:"rules"`
	// Error is the error its sync returned instead (it then retries, rate-limited).
	Error string `json:"error,omitempty"`
}

// syncTimeout bounds one role's sync; a sync that returns an error is reported at once.
const syncTimeout = 30 * time.Second

func main() {
	klog.SetLogger(logr.Discard())
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "aggregationoracle:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	roles, err := readClusterRoles(in)
	if err != nil {
		return err
	}
	results, err := Oracle(context.Background(), roles)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		return err
	}
	return w.Flush()
}

// readClusterRoles reads {"items": [...]} or [...].
func readClusterRoles(in io.Reader) ([]rbacv1.ClusterRole, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var roles []rbacv1.ClusterRole
		if err := json.Unmarshal(trimmed, &roles); err != nil {
			return nil, fmt.Errorf("reading ClusterRoles: %w", err)
		}
		return roles, nil
	}
	var list rbacv1.ClusterRoleList
	if err := json.Unmarshal(trimmed, &list); err != nil {
		return nil, fmt.Errorf("reading a ClusterRole list: %w", err)
	}
	return list.Items, nil
}

// Oracle runs kube-controller-manager's controller once per aggregating ClusterRole of
// roles (in parallel) and returns what its sync applies for each, in input order.
func Oracle(ctx context.Context, roles []rbacv1.ClusterRole) ([]Result, error) {
	seen := map[string]bool{}
	for _, r := range roles {
		if r.Name == "" || seen[r.Name] {
			return nil, fmt.Errorf("every ClusterRole needs a name of its own (%q)", r.Name)
		}
		seen[r.Name] = true
	}
	installErrorRouter()
	var results []Result
	for _, r := range roles {
		if r.AggregationRule != nil {
			results = append(results, Result{Name: r.Name})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(results))
	for i := range results {
		wg.Go(func() {
			rules, syncErr, err := syncOne(ctx, roles, results[i].Name)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("ClusterRole %s: %w", results[i].Name, err)
			case syncErr != "":
				results[i].Error = syncErr
			default:
				results[i].Rules = rules
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// sentinel fills X's own rules in X's world: a rule twice, which no sync result holds.
var sentinel = []rbacv1.PolicyRule{
	{Verbs: []string{"get"}, NonResourceURLs: []string{"/aggregationoracle"}},
	{Verbs: []string{"get"}, NonResourceURLs: []string{"/aggregationoracle"}},
}

// syncOne runs upstream's controller on a world of roles where name's rules are the
// sentinel, and returns the rules of its apply of name, or the error its sync of name
// returned.
func syncOne(ctx context.Context, roles []rbacv1.ClusterRole, name string) (rules []rbacv1.PolicyRule, syncErr string, err error) {
	objects := make([]runtime.Object, 0, len(roles))
	for i := range roles {
		r := roles[i].DeepCopy()
		r.ResourceVersion = ""
		if r.Name == name {
			r.Rules = sentinel
		}
		objects = append(objects, r)
	}
	client := fake.NewClientset(objects...)
	applied := make(chan []rbacv1.PolicyRule, 1)
	var decodeErr error
	var once sync.Once
	client.PrependReactor("patch", "clusterroles", func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch, ok := action.(clienttesting.PatchAction)
		if !ok || patch.GetName() != name {
			return true, &rbacv1.ClusterRole{}, nil
		}
		once.Do(func() {
			// The apply configuration's JSON is a ClusterRole's: name and rules only.
			var cr rbacv1.ClusterRole
			if err := json.Unmarshal(patch.GetPatch(), &cr); err != nil {
				decodeErr = fmt.Errorf("the controller's %s patch: %w", patch.GetPatchType(), err)
			}
			if cr.Rules == nil {
				cr.Rules = []rbacv1.PolicyRule{}
			}
			applied <- cr.Rules
		})
		// Answered without storing it: no watch event, so nothing is synced again.
		return true, &rbacv1.ClusterRole{}, nil
	})
	// Every other verb the controller may use (none but apply in v1.37.1) fails loudly.
	client.PrependReactor("update", "clusterroles", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("aggregationoracle: the controller updated a ClusterRole; only its apply is captured")
	})
	failed := routeErrors(name)
	defer unrouteErrors(name)

	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	controller := clusterroleaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), client.RbacV1())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		controller.Run(ctx, 1)
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	select {
	case rules := <-applied:
		return rules, "", decodeErr
	case msg := <-failed:
		return nil, msg, nil
	case <-ctx.Done():
		return nil, "", fmt.Errorf("the controller neither applied nor failed within %v", syncTimeout)
	}
}

// The controller reports a failed sync through utilruntime.HandleError as
// "<key> failed with : <error>" (processNextWorkItem); errorRoutes sends it to the role's
// syncOne.
var (
	errorRoutesMu sync.Mutex
	errorRoutes   = map[string]chan string{}
	installOnce   sync.Once
)

func installErrorRouter() {
	installOnce.Do(func() {
		utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...interface{}) {
			if err == nil {
				return
			}
			key, msg, ok := strings.Cut(err.Error(), " failed with : ")
			if !ok {
				return
			}
			errorRoutesMu.Lock()
			defer errorRoutesMu.Unlock()
			if ch := errorRoutes[key]; ch != nil {
				select {
				case ch <- msg:
				default:
				}
			}
		}}
	})
}

func routeErrors(name string) <-chan string {
	ch := make(chan string, 1)
	errorRoutesMu.Lock()
	defer errorRoutesMu.Unlock()
	errorRoutes[name] = ch
	return ch
}

func unrouteErrors(name string) {
	errorRoutesMu.Lock()
	defer errorRoutesMu.Unlock()
	delete(errorRoutes, name)
}
