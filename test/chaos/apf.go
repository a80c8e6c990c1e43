package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// throttleName names the FlowSchema and the priority level of the fault "API server
// answers 429".
const throttleName = "chaos-throttle-manager"

// throttleManager is the fault "API server answers 429": for 2-6 s a FlowSchema that
// matches before every default one puts the manager's ServiceAccount into a priority level
// with no seats of its own (no nominal share, nothing borrowed) and no queue, so the API
// server answers the manager's requests 429 Too Many Requests, as API Priority and
// Fairness does to a client over its share. A burst of probe requests under the manager's
// identity shows it bites. With one nominal share instead of none, 2 of the 21 such
// faults of a 300-fault run (seed 7361499056469552116) had none of 500 and none of 800
// probe requests refused: a fault that did not happen.
func (h *Harness) throttleManager(ctx context.Context, rng *rand.Rand) (string, error) {
	d := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
	level := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: throttleName},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				// Zero is allowed from flowcontrol v1 on: no seats of the level's own.
				NominalConcurrencyShares: ptr.To[int32](0),
				LendablePercent:          ptr.To[int32](0),
				// Unset, a level borrows seats from the others without limit: no 429.
				BorrowingLimitPercent: ptr.To[int32](0),
				LimitResponse:         flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	everything := flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
			ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ManagerNamespace, Name: "trustplane-manager"}}},
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
			ClusterScope: true, Namespaces: []string{"*"}}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
	schema := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: throttleName},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: throttleName},
			MatchingPrecedence:         2, // after only "exempt" (1)
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{everything},
		},
	}
	for _, obj := range []client.Object{level, schema} {
		if err := h.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %T %s: %w", obj, throttleName, err)
		}
	}
	defer func() {
		// A fresh context: the run's may be over, and the throttle must not outlive it.
		cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Client.Delete(cleanup, schema)
		_ = h.Client.Delete(cleanup, level)
	}()
	start := time.Now()
	// The API server applies a new FlowSchema within moments of seeing it: probe until
	// the manager's requests are answered 429, or the fault is over.
	rejected, probes := 0, 0
	for rejected == 0 && time.Since(start) < d && ctx.Err() == nil {
		sleep(ctx, 500*time.Millisecond)
		n, sent, err := h.probeAsManager(ctx, 100)
		if err != nil {
			return "", err
		}
		rejected, probes = rejected+n, probes+sent
	}
	sleep(ctx, d-time.Since(start))
	return fmt.Sprintf("for %.1fs, %d of %d probe requests answered 429", d.Seconds(), rejected, probes), nil
}

// probeAsManager sends n requests at once under the manager's identity and counts those
// answered 429. They go out as plain HTTP: client-go would retry a 429 that carries
// Retry-After, as APF's does, and hide it.
func (h *Harness) probeAsManager(ctx context.Context, n int) (rejected, sent int, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Env.ServiceAccountKubeconfig(h.T, ManagerNamespace, "trustplane-manager"))
	if err != nil {
		return 0, 0, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, 0, err
	}
	defer httpClient.CloseIdleConnections()
	url := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + ManagerNamespace + "/serviceaccounts/trustplane-manager"
	var tooMany atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				tooMany.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(tooMany.Load()), n, errors.Join(errs...)
}
