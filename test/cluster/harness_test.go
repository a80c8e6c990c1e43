package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/garden"
	"github.com/trustplane/trustplane/internal/shoot"
	"github.com/trustplane/trustplane/internal/testenv"
)

// front stands where gardener-apiserver would: it proxies everything to the test garden
// API server, answers shoots/adminkubeconfig (which no CRD can serve) with a cluster-admin
// kubeconfig of the test shoot API server, refuses to delete a Shoot without Gardener's
// confirmation annotation, plays the admission plugins and webhooks that look other
// objects up (admit, garden_admission_test.go), and can be switched off to play an
// unreachable garden.
type front struct {
	server *httptest.Server
	garden client.Client
	// adminKubeconfig is what shoots/adminkubeconfig hands out.
	adminKubeconfig []byte
	down            atomic.Bool
	adminRequests   sync.Map // shoot name → *atomic.Int32
	// shootWrites counts writes of a Shoot's spec and metadata (not of its status) per
	// shoot name; failShootWrites, when not 0, is the status code they are answered with.
	shootWrites     sync.Map // shoot name → *atomic.Int32
	failShootWrites atomic.Int32
}

// shootWritesFor is how many writes of the shoot (status excluded) reached the front.
func (f *front) shootWritesFor(shootName string) int32 {
	n, _ := f.shootWrites.LoadOrStore(shootName, &atomic.Int32{})
	return n.(*atomic.Int32).Load()
}

// adminRequestsFor is how many admin kubeconfigs were handed out for the shoot.
func (f *front) adminRequestsFor(shootName string) int32 {
	n, _ := f.adminRequests.LoadOrStore(shootName, &atomic.Int32{})
	return n.(*atomic.Int32).Load()
}

var adminKubeconfigPath = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots/([^/]+)/adminkubeconfig$`)
var shootPath = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots/([^/]+)$`)

func newFront(gardenEnv *testenv.Env, adminKubeconfig []byte) (*front, error) {
	target, err := url.Parse(gardenEnv.Config.Host)
	if err != nil {
		return nil, err
	}
	if target.Scheme == "" {
		target, _ = url.Parse("https://" + gardenEnv.Config.Host)
	}
	transport, err := rest.TransportFor(gardenEnv.Config)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	f := &front{garden: gardenEnv.Client, adminKubeconfig: adminKubeconfig}
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "garden is down", http.StatusServiceUnavailable)
			return
		}
		if m := adminKubeconfigPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
			f.answerAdminKubeconfig(w, r, m[1], m[2])
			return
		}
		if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) {
			n, _ := f.shootWrites.LoadOrStore(m[2], &atomic.Int32{})
			n.(*atomic.Int32).Add(1)
			if code := f.failShootWrites.Load(); code != 0 {
				writeStatus(w, int(code), http.StatusText(int(code)), "injected by the test front")
				return
			}
		}
		if ns, ok := shootWrite(r); ok {
			if refusal := f.admit(r, ns); refusal != nil {
				writeStatus(w, refusal.code, http.StatusText(refusal.code), refusal.message)
				return
			}
		}
		if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodDelete && !f.deletionConfirmed(r.Context(), m[1], m[2]) {
			writeStatus(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("shoot %s/%s: deletion must be confirmed with the %s annotation", m[1], m[2], shoot.ConfirmDeletionAnnotation))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return f, nil
}

var shootsPath = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots$`)

// shootWrite: r creates or changes a Shoot's spec (not its status), in namespace ns.
func shootWrite(r *http.Request) (ns string, ok bool) {
	if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) {
		return m[1], true
	}
	if m := shootsPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
		return m[1], true
	}
	return "", false
}

// config reaches the garden through the front.
func (f *front) config() *rest.Config { return &rest.Config{Host: f.server.URL} }

func (f *front) deletionConfirmed(ctx context.Context, ns, name string) bool {
	s := garden.NewShoot()
	if err := f.garden.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return true // let the API server answer (e.g. not found)
	}
	return s.GetAnnotations()[shoot.ConfirmDeletionAnnotation] == "true"
}

func (f *front) answerAdminKubeconfig(w http.ResponseWriter, r *http.Request, ns, name string) {
	var req struct {
		Spec struct {
			ExpirationSeconds int64 `json:"expirationSeconds"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Spec.ExpirationSeconds < 600 {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "spec.expirationSeconds must be at least 600")
		return
	}
	s := garden.NewShoot()
	if err := f.garden.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		writeStatus(w, http.StatusNotFound, "NotFound", err.Error())
		return
	}
	n, _ := f.adminRequests.LoadOrStore(name, &atomic.Int32{})
	n.(*atomic.Int32).Add(1)
	expires := time.Now().Add(time.Duration(req.Spec.ExpirationSeconds) * time.Second).UTC()
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "AdminKubeconfigRequest",
		"status": map[string]any{"kubeconfig": f.adminKubeconfig, "expirationTimestamp": expires.Format(time.RFC3339)},
	})
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg})
}

// gardener plays Gardener's part for Shoots: it holds a finalizer, walks a new Shoot
// through Create Processing to Succeeded (or Failed in the region "fail-region"), and on
// deletion reports a Delete operation before letting the Shoot go. Shoots named in hold
// stay at Processing until released; Reconcile operations are left to the tests.
type gardener struct {
	client client.Client
	hold   sync.Map // shoot name → struct{}
}

const gardenerFinalizer = "gardener"

func startGardener(ctx context.Context, env *testenv.Env) (*gardener, error) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return nil, err
	}
	g := &gardener{client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("test-gardener").For(garden.NewShoot()).Complete(g); err != nil {
		return nil, err
	}
	go func() { _ = mgr.Start(ctx) }()
	return g, nil
}

func (g *gardener) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := garden.NewShoot()
	if err := g.client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !s.GetDeletionTimestamp().IsZero() {
		if p := shoot.ProgressOf(s); p.Phase != shoot.PhaseDeleting {
			return reconcile.Result{}, g.report(ctx, s, "Delete", "Processing", 50)
		}
		controllerutil.RemoveFinalizer(s, gardenerFinalizer)
		return reconcile.Result{}, g.client.Update(ctx, s)
	}
	if controllerutil.AddFinalizer(s, gardenerFinalizer) {
		return reconcile.Result{}, g.client.Update(ctx, s)
	}
	if shoot.ProgressOf(s).Type == "Reconcile" {
		return reconcile.Result{}, nil // reconciles of a created shoot are played by the tests
	}
	if _, held := g.hold.Load(s.GetName()); held {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Processing", 30)
	}
	if region, _, _ := unstructured.NestedString(s.Object, "spec", "region"); region == "fail-region" {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Failed", 10)
	}
	if shoot.ProgressOf(s).Type == "" {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Processing", 30)
	}
	return reconcile.Result{}, g.report(ctx, s, "Create", "Succeeded", 100)
}

func (g *gardener) release(name string) {
	g.hold.Delete(name)
	// Touch the Shoot so the gardener looks again.
	s := garden.NewShoot()
	s.SetNamespace(projectNamespace)
	s.SetName(name)
	_ = g.client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/released":"true"}}}`)))
}

func (g *gardener) report(ctx context.Context, s *unstructured.Unstructured, opType, state string, progress int64) error {
	if p := shoot.ProgressOf(s); p.Type == opType && p.State == state {
		return nil
	}
	op := map[string]any{"type": opType, "state": state, "progress": progress, "description": strings.ToLower(opType) + " " + strings.ToLower(state),
		"lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedMap(s.Object, op, "status", "lastOperation"); err != nil {
		return err
	}
	return g.client.Status().Update(ctx, s)
}

// adminUser adds a cluster-admin user to the shoot API server, as Gardener's admin
// kubeconfigs are.
func adminUser(env *envtest.Environment) ([]byte, error) {
	user, err := env.AddUser(envtest.User{Name: "gardener-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}
