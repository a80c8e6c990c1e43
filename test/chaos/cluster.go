package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trustplane/trustplane/api/conditions"
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

// The cluster system: Gardener Clusters against the garden stand-in (test/provisioning/gardenstandin:
// the test API server with Gardener's Shoot CRD, behind a front playing gardener-apiserver,
// and a stand-in Gardener walking Shoots to Succeeded), and the Secret credential pool
// (--subscription-pool=secrets) shared by two tenant namespaces: Clusters and standalone
// SubscriptionRequests claim dedicated credentials for the tenants' granted global
// accounts, or shared ones, and release them on delete; the workload plays the operator
// handing cleaned (dirty) credentials back. The fault "garden unreachable" cuts the
// manager's connections to the front at TCP and refuses new ones (a network outage, as the
// target's); "garden answers 503" switches the front to 503 (gardener-apiserver up but
// failing). The pool's other claimer (poolrival.go) claims credentials of the same pool
// at the moment the manager claims them.
const (
	gardenProject  = "garden-chaos"
	poolNamespace  = "chaos-pool"
	poolProvider   = "gcp"
	poolDedicated  = 6
	poolShared     = 2
	maxClusters    = 4
	maxSubRequests = 4
	// gardenCanary is the Cluster (in the first tenant) only the fault "garden
	// unreachable" changes: its recovery is the change reaching the Shoot.
	gardenCanary = "canary"
)

// poolTenants are the tenant namespaces and the global accounts each is granted.
var poolTenants = map[string][]string{
	"chaos-tenant-a": {"ga-a1", "ga-a2"},
	"chaos-tenant-b": {"ga-b1", "ga-b2"},
}

type clusterSystem struct {
	front *gardenstandin.Front
	// gardenProxy stands between the manager and the front: the garden's network.
	gardenProxy      *Proxy
	gardenKubeconfig string

	mu   sync.Mutex
	next int
	// bound is, per SubscriptionRequest UID, the credential it was first seen assigned
	// (and at which list's resourceVersion): it must stay so until the request is deleted.
	bound map[types.UID]claim
	// reported are the objects already reported left behind: each is reported once.
	reported map[types.UID]bool

	// canary tells when a change made after an outage is Ready again.
	canary changeCanary
	// rival is the pool's other claimer.
	rival *poolRival
}

type claim struct {
	credential, rv string
}

func newCluster() System {
	return &clusterSystem{bound: map[types.UID]claim{}, reported: map[types.UID]bool{}}
}

func (s *clusterSystem) Name() string { return "cluster" }

// Setup installs Gardener's Shoot CRD, the project and pool namespaces, the pool's
// credentials and the tenants with their grants, and starts the garden stand-in.
func (s *clusterSystem) Setup(ctx context.Context, h *Harness) error {
	crd := filepath.Join(testenv.RepoRoot(), "test", "provisioning", "cluster", "testdata", "shoots.yaml")
	if _, err := envtest.InstallCRDs(h.Env.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the Shoot CRD: %w", err)
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardenProject}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNamespace}},
	}
	for _, ns := range sortedTenants() {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{cp.AnnotationGlobalAccounts: strings.Join(poolTenants[ns], ",")}}})
	}
	objs = append(objs, gardenCluster(sortedTenants()[0], gardenCanary, "shared"))
	for i := range poolDedicated {
		objs = append(objs, poolCredential(fmt.Sprintf("cred-%02d", i), nil))
	}
	for i := range poolShared {
		objs = append(objs, poolCredential(fmt.Sprintf("shared-%02d", i), map[string]string{cp.LabelShared: "true"}))
	}
	for _, obj := range objs {
		if err := h.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	// Gardener's admin kubeconfig of a shoot: the shoots are this API server too, so
	// the Clusters' administrators are bound here.
	front, err := gardenstandin.NewFront(h.Env.Config, h.Env.Client, h.Env.Environment().KubeConfig, nil)
	if err != nil {
		return err
	}
	s.front = front
	h.T.Cleanup(front.Close)
	gardenerCtx, stop := context.WithCancel(context.Background())
	h.T.Cleanup(stop)
	if _, err := gardenstandin.StartGardener(gardenerCtx, h.Env.Config); err != nil {
		return fmt.Errorf("starting the stand-in gardener: %w", err)
	}
	frontURL, err := url.Parse(front.Server.URL)
	if err != nil {
		return err
	}
	if s.rival, err = startPoolRival(ctx, h); err != nil {
		return err
	}
	s.gardenProxy = h.NewProxy(frontURL.Host)
	frontURL.Host = s.gardenProxy.Addr
	kc := clientcmdapi.NewConfig()
	kc.Clusters["garden"] = &clientcmdapi.Cluster{Server: frontURL.String()}
	kc.AuthInfos["garden"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["garden"] = &clientcmdapi.Context{Cluster: "garden", AuthInfo: "garden"}
	kc.CurrentContext = "garden"
	s.gardenKubeconfig = filepath.Join(h.T.TempDir(), "garden.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, s.gardenKubeconfig); err != nil {
		return err
	}
	return os.Chmod(s.gardenKubeconfig, 0o600)
}

func sortedTenants() []string {
	var out []string
	for ns := range poolTenants {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

func poolCredential(name string, labels map[string]string) *corev1.Secret {
	l := map[string]string{cp.LabelHyperscalerType: poolProvider}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: poolNamespace, Name: name, Labels: l},
		Data: map[string][]byte{"credentials": []byte("hyperscaler account " + name)}}
}

// ManagerArgs: the garden (the front) and its project, and the Secret pool.
func (s *clusterSystem) ManagerArgs(h *Harness) []string {
	return []string{"--garden-kubeconfig=" + s.gardenKubeconfig, "--garden-namespace=" + gardenProject,
		"--subscription-pool=secrets", "--subscription-pool-namespace=" + poolNamespace}
}

// selector is a random subscription selector of tenant ns: shared, or one of its accounts.
func selector(rng *rand.Rand, ns string) string {
	accounts := poolTenants[ns]
	if i := rng.IntN(len(accounts) + 1); i < len(accounts) {
		return "globalaccount:" + accounts[i]
	}
	return "shared"
}

// Step creates or deletes a Cluster or a standalone SubscriptionRequest, or hands a
// released (dirty) credential back as the operator does once its account is cleaned.
func (s *clusterSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tenants := sortedTenants()
	ns := tenants[rng.IntN(len(tenants))]
	switch action := rng.IntN(100); {
	case action < 30:
		clusters := &operatorv1alpha1.ClusterList{}
		if err := h.Client.List(ctx, clusters, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(clusters.Items) >= maxClusters {
			return deleteOne(ctx, h, rng, clusters)
		}
		s.next++
		return h.Client.Create(ctx, gardenCluster(ns, fmt.Sprintf("c%d", s.next), selector(rng, ns)))
	case action < 50:
		clusters := &operatorv1alpha1.ClusterList{}
		if err := h.Client.List(ctx, clusters, client.InNamespace(ns)); err != nil {
			return err
		}
		return deleteOne(ctx, h, rng, clusters)
	case action < 70:
		requests, err := standalone(ctx, h, ns)
		if err != nil {
			return err
		}
		if len(requests.Items) >= maxSubRequests {
			return deleteOne(ctx, h, rng, requests)
		}
		s.next++
		return h.Client.Create(ctx, &cp.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sr%d", s.next)},
			Spec: cp.SubscriptionRequestSpec{Provider: poolProvider, SubscriptionSelector: selector(rng, ns)}})
	case action < 85:
		requests, err := standalone(ctx, h, ns)
		if err != nil {
			return err
		}
		return deleteOne(ctx, h, rng, requests)
	default:
		return handBack(ctx, h, 1)
	}
}

func gardenCluster(ns, name, sel string) *operatorv1alpha1.Cluster {
	return &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{Core: operatorv1alpha1.ClusterCore{Region: "europe-west3"},
			Infrastructure: operatorv1alpha1.ClusterInfrastructure{Provider: poolProvider, MachineType: "n2-standard-4", AutoScalerMin: 1, AutoScalerMax: 3,
				NumberOfZones: 1, SubscriptionSelector: sel},
			Administrators: []string{"admin-" + name + "@example.com"}}}
}

// standalone are the SubscriptionRequests of ns that no Cluster owns.
func standalone(ctx context.Context, h *Harness, ns string) (*cp.SubscriptionRequestList, error) {
	all := &cp.SubscriptionRequestList{}
	if err := h.Client.List(ctx, all, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := &cp.SubscriptionRequestList{}
	for _, sr := range all.Items {
		if len(sr.OwnerReferences) == 0 {
			out.Items = append(out.Items, sr)
		}
	}
	return out, nil
}

// deleteOne deletes a random item of list that is not being deleted already (never the
// garden canary).
func deleteOne(ctx context.Context, h *Harness, rng *rand.Rand, list client.ObjectList) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	var candidates []client.Object
	for _, item := range items {
		if obj := item.(client.Object); obj.GetDeletionTimestamp().IsZero() && obj.GetName() != gardenCanary {
			candidates = append(candidates, obj)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return client.IgnoreNotFound(h.Client.Delete(ctx, candidates[rng.IntN(len(candidates))]))
}

// handBack hands back up to n dirty credentials no request names any more (the account
// is cleaned: `kubectl label secret <name> dirty- tenantName-`).
func handBack(ctx context.Context, h *Harness, n int) error {
	creds := &corev1.SecretList{}
	if err := h.Client.List(ctx, creds, client.InNamespace(poolNamespace), client.MatchingLabels{cp.LabelDirty: "true"}); err != nil {
		return err
	}
	requests := &cp.SubscriptionRequestList{}
	if err := h.Client.List(ctx, requests); err != nil {
		return err
	}
	named := map[string]bool{}
	for _, sr := range requests.Items {
		named[sr.Status.GardenerSecretName] = true
	}
	done := 0
	for i := range creds.Items {
		if done == n {
			break
		}
		c := &creds.Items[i]
		if named[c.Name] {
			continue
		}
		patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"labels":{%q:null,%q:null}}}`, c.ResourceVersion, cp.LabelDirty, cp.LabelTenantName)
		if err := h.Client.Patch(ctx, c, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return client.IgnoreNotFound(err)
		}
		done++
	}
	return nil
}

// poolView is one observation: the requests of the tenants, then the Shoots, then the
// Clusters, each listed after the one before (so at a later revision).
type poolView struct {
	requests *cp.SubscriptionRequestList
	shoots   *unstructured.UnstructuredList
	clusters *operatorv1alpha1.ClusterList
}

func observePool(ctx context.Context, h *Harness) (*poolView, error) {
	v := &poolView{requests: &cp.SubscriptionRequestList{}, shoots: &unstructured.UnstructuredList{}, clusters: &operatorv1alpha1.ClusterList{}}
	v.shoots.SetGroupVersionKind(shoot.GVK.GroupVersion().WithKind(shoot.GVK.Kind + "List"))
	if err := h.Client.List(ctx, v.requests); err != nil {
		return nil, err
	}
	if err := h.Client.List(ctx, v.shoots, client.InNamespace(gardenProject)); err != nil {
		return nil, err
	}
	if err := h.Client.List(ctx, v.clusters); err != nil {
		return nil, err
	}
	v.requests.Items = slices.DeleteFunc(v.requests.Items, func(sr cp.SubscriptionRequest) bool { return poolTenants[sr.Namespace] == nil })
	v.clusters.Items = slices.DeleteFunc(v.clusters.Items, func(c operatorv1alpha1.Cluster) bool { return poolTenants[c.Namespace] == nil })
	return v, nil
}

func assignedTo(sr *cp.SubscriptionRequest) string {
	if ready := meta.FindStatusCondition(sr.Status.Conditions, conditions.Ready); ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == cp.ReasonAssigned {
		return sr.Status.GardenerSecretName
	}
	return ""
}

// account is the global account a request's selector names ("" for shared).
func account(sr *cp.SubscriptionRequest) string {
	sel := sr.Spec.SubscriptionSelector
	if sel == "" || sel == "shared" {
		return ""
	}
	return strings.TrimPrefix(sel, "globalaccount:")
}

// Check checks, on one observation (requests, then Shoots, then Clusters):
//   - "pool: one tenant per credential": the requests (not being deleted) assigned one
//     dedicated credential are all of one namespace and one global account;
//   - "pool: claim kept": a request once assigned a credential stays assigned that one
//     until it is deleted, and a claim of the pool's other claimer stays its own until it
//     releases it (poolrival.go);
//   - "cluster: shoot ownership": every Shoot is labelled for the Cluster its name is
//     derived from, and no two Clusters report the same Shoot;
//   - "cluster: no shoot without cluster" and "cluster: no request without cluster": a
//     Cluster goes only after its Shoot and its SubscriptionRequest, so a Shoot or an owned
//     request seen before its Cluster was found gone, and still there after, is left behind.
func (s *clusterSystem) Check(ctx context.Context, h *Harness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := observePool(ctx, h)
	if err != nil {
		h.NotJudged("cluster: shoot ownership", "observing the Clusters, Shoots and pool: %v", err)
		return
	}
	s.checkClaims(h, v)
	s.checkShoots(ctx, h, v)
	s.rival.check(ctx)
}

func (s *clusterSystem) checkClaims(h *Harness, v *poolView) {
	holders := map[string][]string{} // dedicated credential → namespace/name (account)
	tenants := map[string]map[string]bool{}
	for i := range v.requests.Items {
		sr := &v.requests.Items[i]
		cred := assignedTo(sr)
		if cred == "" || !sr.DeletionTimestamp.IsZero() {
			continue
		}
		if first, ok := s.bound[sr.UID]; !ok {
			s.bound[sr.UID] = claim{credential: cred, rv: v.requests.ResourceVersion}
		} else {
			h.Check("pool: claim kept", first.credential == cred,
				"SubscriptionRequest %s/%s (uid %s) was assigned %s (requests listed at rv %s), now %s (rv %s)",
				sr.Namespace, sr.Name, sr.UID, first.credential, first.rv, cred, v.requests.ResourceVersion)
		}
		if strings.HasPrefix(cred, "shared-") {
			continue
		}
		holders[cred] = append(holders[cred], fmt.Sprintf("%s/%s (%s)", sr.Namespace, sr.Name, account(sr)))
		if tenants[cred] == nil {
			tenants[cred] = map[string]bool{}
		}
		tenants[cred][sr.Namespace+" "+account(sr)] = true
	}
	for _, cred := range slices.Sorted(maps.Keys(holders)) {
		h.Check("pool: one tenant per credential", len(tenants[cred]) == 1,
			"credential %s is assigned, at rv %s, to %s", cred, v.requests.ResourceVersion, strings.Join(holders[cred], ", "))
	}
	// A request assigned while not yet seen, then deleted, is forgotten with the rest.
	live := map[types.UID]bool{}
	for _, sr := range v.requests.Items {
		live[sr.UID] = true
	}
	for uid := range s.bound {
		if !live[uid] {
			delete(s.bound, uid)
		}
	}
}

func (s *clusterSystem) checkShoots(ctx context.Context, h *Harness, v *poolView) {
	clusters := map[types.NamespacedName]*operatorv1alpha1.Cluster{}
	clusterUIDs := map[types.UID]bool{}
	reported := map[string][]string{}
	for i := range v.clusters.Items {
		c := &v.clusters.Items[i]
		clusters[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
		clusterUIDs[c.UID] = true
		if c.Status.ShootName != "" {
			reported[c.Status.ShootName] = append(reported[c.Status.ShootName], c.Namespace+"/"+c.Name)
		}
	}
	for name, by := range reported {
		h.Check("cluster: shoot ownership", len(by) == 1, "Shoot %s is reported by Clusters %s (rv %s)", name, strings.Join(by, ", "), v.clusters.ResourceVersion)
	}
	var suspects []client.Object
	for i := range v.shoots.Items {
		sh := &v.shoots.Items[i]
		labels := sh.GetLabels()
		owner := types.NamespacedName{Namespace: labels[operatorv1alpha1.ClusterNamespaceLabel], Name: labels[operatorv1alpha1.ClusterNameLabel]}
		h.Check("cluster: shoot ownership", shoot.Name(owner.Namespace, owner.Name) == sh.GetName(),
			"Shoot %s (rv %s) is labelled for Cluster %s, whose Shoot is %s", sh.GetName(), sh.GetResourceVersion(), owner, shoot.Name(owner.Namespace, owner.Name))
		if poolTenants[owner.Namespace] != nil && clusters[owner] == nil {
			suspects = append(suspects, sh)
		}
	}
	for i := range v.requests.Items {
		sr := &v.requests.Items[i]
		for _, ref := range sr.OwnerReferences {
			if ref.Kind == "Cluster" && !clusterUIDs[ref.UID] {
				suspects = append(suspects, sr)
			}
		}
	}
	for _, obj := range suspects {
		again := obj.DeepCopyObject().(client.Object)
		err := h.Client.Get(ctx, client.ObjectKeyFromObject(obj), again)
		if apierrors.IsNotFound(err) || (err == nil && again.GetUID() != obj.GetUID()) {
			continue
		}
		if err != nil || s.reported[obj.GetUID()] {
			continue
		}
		s.reported[obj.GetUID()] = true
		invariant := "cluster: no shoot without cluster"
		if _, ok := obj.(*cp.SubscriptionRequest); ok {
			invariant = "cluster: no request without cluster"
		}
		h.Check(invariant, false, "%T %s/%s (uid %s, rv %s) is still there after its Cluster was gone (Clusters listed at rv %s)",
			obj, obj.GetNamespace(), obj.GetName(), obj.GetUID(), again.GetResourceVersion(), v.clusters.ResourceVersion)
	}
}

// Faults: the garden unreachable (connections cut at TCP, new ones refused) and the
// garden answering 503; each recovered once a change of the garden canary is Ready.
func (s *clusterSystem) Faults(h *Harness) []Fault {
	return []Fault{{
		Kind: "garden unreachable",
		Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			d := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
			s.gardenProxy.Down(d)
			s.canary.reset()
			return fmt.Sprintf("garden cut at TCP for %.1fs", d.Seconds()), nil
		},
		Recovered: s.canaryReconciled,
	}, {
		Kind: "garden answers 503",
		Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			d := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
			s.front.Down.Store(true)
			defer s.front.Down.Store(false)
			sleep(ctx, d)
			s.canary.reset()
			return fmt.Sprintf("garden front for %.1fs", d.Seconds()), nil
		},
		Recovered: s.canaryReconciled,
	}}
}

// canaryReconciled changes the garden canary once after an outage (autoScalerMax between
// 3 and 4) and says whether it is Ready for the change: written to its Shoot, and its
// administrators bound with a new admin kubeconfig, both through the garden.
func (s *clusterSystem) canaryReconciled(ctx context.Context, h *Harness) bool {
	obj := &operatorv1alpha1.Cluster{}
	return s.canary.recovered(ctx, h, client.ObjectKey{Namespace: sortedTenants()[0], Name: gardenCanary}, obj,
		func() { obj.Spec.Infrastructure.AutoScalerMax = 7 - obj.Spec.Infrastructure.AutoScalerMax },
		func() []metav1.Condition { return obj.Status.Conditions })
}

// Settle stops the pool's other claimer (its last claim released), hands every released
// credential back (so no waiting request waits for the operator), then checks:
//   - "cluster: ready": every Cluster is Ready, its administrators bound;
//   - "pool: request ready": every standalone SubscriptionRequest is assigned;
//   - "cluster: deleted leaves nothing": no Shoot of a Cluster that is gone, no request
//     owned by a Cluster that is gone;
//   - "pool: released on delete": every dedicated credential claimed and not dirty is
//     assigned to a request that exists (a deleted request released its claim).
func (s *clusterSystem) Settle(ctx context.Context, h *Harness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rivalClaims := s.rival.stop()
	h.Eventually(ctx, "progress: the pool's other claimer released its claim", s.rival.check)
	var v *poolView
	h.Eventually(ctx, "cluster: pool observed", func(ctx context.Context) bool {
		var err error
		_ = handBack(ctx, h, poolDedicated)
		v, err = observePool(ctx, h)
		return err == nil
	})
	if v == nil {
		return
	}
	for _, c := range v.clusters.Items {
		key := client.ObjectKeyFromObject(&c)
		waits := ""
		h.Eventually(ctx, "cluster: ready", func(ctx context.Context) bool {
			_ = handBack(ctx, h, poolDedicated)
			got := &operatorv1alpha1.Cluster{}
			err := h.Client.Get(ctx, key, got)
			if !c.DeletionTimestamp.IsZero() {
				return apierrors.IsNotFound(err) // it was being deleted: it must go
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, conditions.Ready)
			ok := err == nil && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == got.Generation
			if !ok && err == nil && ready != nil && waits != ready.Reason+" "+ready.Message {
				waits = ready.Reason + " " + ready.Message // said once per reason and message
				h.Logf("cluster: Cluster %s waits: %s", key, waits)
			}
			return ok
		})
	}
	for _, sr := range v.requests.Items {
		if len(sr.OwnerReferences) > 0 {
			continue
		}
		key := client.ObjectKeyFromObject(&sr)
		h.Eventually(ctx, "pool: request ready", func(ctx context.Context) bool {
			_ = handBack(ctx, h, poolDedicated)
			got := &cp.SubscriptionRequest{}
			err := h.Client.Get(ctx, key, got)
			if !sr.DeletionTimestamp.IsZero() {
				return apierrors.IsNotFound(err)
			}
			return err == nil && assignedTo(got) != ""
		})
	}
	var left []string
	h.Eventually(ctx, "cluster: deleted leaves nothing", func(ctx context.Context) bool {
		v, err := observePool(ctx, h)
		if err != nil {
			return false
		}
		left = left[:0]
		live := map[string]bool{}
		uids := map[types.UID]bool{}
		for _, c := range v.clusters.Items {
			live[c.Namespace+"/"+c.Name] = true
			uids[c.UID] = true
		}
		for _, sh := range v.shoots.Items {
			l := sh.GetLabels()
			if owner := l[operatorv1alpha1.ClusterNamespaceLabel] + "/" + l[operatorv1alpha1.ClusterNameLabel]; !live[owner] {
				left = append(left, fmt.Sprintf("Shoot %s of Cluster %s", sh.GetName(), owner))
			}
		}
		for _, sr := range v.requests.Items {
			for _, ref := range sr.OwnerReferences {
				if ref.Kind == "Cluster" && !uids[ref.UID] {
					left = append(left, fmt.Sprintf("SubscriptionRequest %s/%s of Cluster uid %s", sr.Namespace, sr.Name, ref.UID))
				}
			}
		}
		return len(left) == 0
	})
	if len(left) > 0 {
		h.Logf("cluster: left behind: %s", strings.Join(left, "; "))
	}
	h.Eventually(ctx, "pool: released on delete", func(ctx context.Context) bool {
		creds := &corev1.SecretList{}
		requests := &cp.SubscriptionRequestList{}
		if h.Client.List(ctx, creds, client.InNamespace(poolNamespace), client.HasLabels{cp.LabelTenantName}) != nil || h.Client.List(ctx, requests) != nil {
			return false
		}
		used := map[string]bool{}
		for _, sr := range requests.Items {
			used[sr.Status.GardenerSecretName] = true
		}
		left = left[:0]
		for _, c := range creds.Items {
			if c.Labels[cp.LabelDirty] != "true" && !used[c.Name] {
				left = append(left, fmt.Sprintf("credential %s (rv %s) claimed by %s for %s", c.Name, c.ResourceVersion, c.Annotations[cp.AnnotationClaimedBy], c.Labels[cp.LabelTenantName]))
			}
		}
		return len(left) == 0
	})
	if len(left) > 0 {
		h.Logf("cluster: claims not released: %s", strings.Join(left, "; "))
	}
	h.Logf("cluster: settled with %d Clusters, %d SubscriptionRequests, %d claims of the pool's other claimer; shoot writes and admin kubeconfigs served by the garden front",
		len(v.clusters.Items), len(v.requests.Items), rivalClaims)
}
