// Package gardenstandin stands in for Gardener in tests that run against a real API server
// with Gardener's Shoot CRD installed (test/provisioning/cluster/testdata/shoots.yaml): a Front where
// gardener-apiserver would be, and a Gardener that plays Gardener's reconcile of Shoots.
// test/provisioning/cluster and test/chaos share it.
package gardenstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// Front stands where gardener-apiserver would: it proxies everything to the garden API
// server, answers shoots/adminkubeconfig (which no CRD can serve) with AdminKubeconfig,
// refuses to delete a Shoot without Gardener's confirmation annotation, lets Admit play
// the admission plugins and webhooks that look other objects up, and can be switched off
// (Down) to play an unreachable garden.
type Front struct {
	Server *httptest.Server
	// AdminKubeconfig is what shoots/adminkubeconfig hands out: a cluster-admin
	// kubeconfig of the shoot.
	AdminKubeconfig []byte
	// Down answers every request with 503 while true.
	Down atomic.Bool
	// FailShootWrites, when not 0, is the status code writes of a Shoot's spec and
	// metadata are answered with.
	FailShootWrites atomic.Int32

	garden        client.Client
	admit         Admit
	adminRequests sync.Map // shoot name → *atomic.Int32
	shootWrites   sync.Map // shoot name → *atomic.Int32
}

// Admit judges a write of a Shoot's spec in the project namespace before the API server
// does, as Gardener's admission plugins and webhooks would: a code of 0 admits it, any
// other refuses it with that status code and message.
type Admit func(r *http.Request, namespace string) (code int, message string)

var (
	adminKubeconfigPath = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots/([^/]+)/adminkubeconfig$`)
	shootPath           = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots/([^/]+)$`)
	shootsPath          = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots$`)
)

// NewFront serves the garden API server at cfg (read with gardenClient) on a local port;
// admit may be nil.
func NewFront(cfg *rest.Config, gardenClient client.Client, adminKubeconfig []byte, admit Admit) (*Front, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	if target.Scheme == "" {
		target, _ = url.Parse("https://" + cfg.Host)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	// The garden API server going away mid-stream (a restart the chaos suite injects) is
	// what a client sees as a broken connection; the front has nothing to add to it.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	f := &Front{garden: gardenClient, AdminKubeconfig: adminKubeconfig, admit: admit}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.Down.Load() {
			http.Error(w, "garden is down", http.StatusServiceUnavailable)
			return
		}
		if m := adminKubeconfigPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
			f.answerAdminKubeconfig(w, r, m[1], m[2])
			return
		}
		if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) {
			counter(&f.shootWrites, m[2]).Add(1)
			if code := f.FailShootWrites.Load(); code != 0 {
				WriteStatus(w, int(code), http.StatusText(int(code)), "injected by the test front")
				return
			}
		}
		if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) && !f.exists(r.Context(), m[1], m[2]) {
			if message := ShootNameTooLong(m[1], m[2]); message != "" {
				WriteStatus(w, http.StatusBadRequest, "BadRequest", message)
				return
			}
		}
		if ns, ok := shootWrite(r); ok && f.admit != nil {
			if code, message := f.admit(r, ns); code != 0 {
				WriteStatus(w, code, http.StatusText(code), message)
				return
			}
		}
		if m := shootPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodDelete && !f.deletionConfirmed(r.Context(), m[1], m[2]) {
			WriteStatus(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("shoot %s/%s: deletion must be confirmed with the %s annotation", m[1], m[2], operatorv1alpha1.ConfirmDeletionAnnotation))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return f, nil
}

// Close stops serving, closing the watches in flight.
func (f *Front) Close() {
	f.Server.CloseClientConnections()
	f.Server.Close()
}

// Config reaches the garden through the front (with no credentials: the front has them).
func (f *Front) Config() *rest.Config { return &rest.Config{Host: f.Server.URL} }

// ShootWritesFor is how many writes of the shoot (status excluded) reached the front.
func (f *Front) ShootWritesFor(shootName string) int32 {
	return counter(&f.shootWrites, shootName).Load()
}

// AdminRequestsFor is how many admin kubeconfigs were handed out for the shoot.
func (f *Front) AdminRequestsFor(shootName string) int32 {
	return counter(&f.adminRequests, shootName).Load()
}

func counter(m *sync.Map, name string) *atomic.Int32 {
	n, _ := m.LoadOrStore(name, &atomic.Int32{})
	return n.(*atomic.Int32)
}

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

// ShootNameTooLong is Gardener's refusal of a new Shoot whose name and project name are
// longer than 21 characters together, "" if it fits (gardener/gardener
// plugin/pkg/shoot/validator/admission.go, checked on CREATE only, so existing Shoots
// are never refused later). The project of a namespace "garden-<project>" is <project>
// (Gardener reads it from the Project; the stand-in has none).
func ShootNameTooLong(namespace, name string) string {
	const lengthLimit = 21
	project := strings.TrimPrefix(namespace, "garden-")
	if len(project+name) > lengthLimit {
		return fmt.Sprintf("the length of the shoot name and the project name must not exceed %d characters (project: %s; shoot: %s)", lengthLimit, project, name)
	}
	return ""
}

// exists says whether the Shoot is there already: a write of one that is not creates it.
func (f *Front) exists(ctx context.Context, ns, name string) bool {
	s := garden.NewShoot()
	return f.garden.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s) == nil
}

func (f *Front) deletionConfirmed(ctx context.Context, ns, name string) bool {
	s := garden.NewShoot()
	if err := f.garden.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return true // let the API server answer (e.g. not found)
	}
	return s.GetAnnotations()[operatorv1alpha1.ConfirmDeletionAnnotation] == "true"
}

func (f *Front) answerAdminKubeconfig(w http.ResponseWriter, r *http.Request, ns, name string) {
	var req struct {
		Spec struct {
			ExpirationSeconds int64 `json:"expirationSeconds"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Spec.ExpirationSeconds < 600 {
		WriteStatus(w, http.StatusBadRequest, "BadRequest", "spec.expirationSeconds must be at least 600")
		return
	}
	s := garden.NewShoot()
	if err := f.garden.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		WriteStatus(w, http.StatusNotFound, "NotFound", err.Error())
		return
	}
	counter(&f.adminRequests, name).Add(1)
	expires := time.Now().Add(time.Duration(req.Spec.ExpirationSeconds) * time.Second).UTC()
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "AdminKubeconfigRequest",
		"status": map[string]any{"kubeconfig": f.AdminKubeconfig, "expirationTimestamp": expires.Format(time.RFC3339)},
	})
}

// WriteStatus answers with a Kubernetes Status of code, reason and message.
func WriteStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg})
}

// Gardener plays Gardener's part for Shoots: it holds a finalizer, walks a new Shoot
// through Create Processing to Succeeded (or Failed in the region FailRegion), and on
// deletion reports a Delete operation before letting the Shoot go. Shoots Held stay at
// Processing until Released; Reconcile operations are left to the tests.
type Gardener struct {
	client client.Client
	hold   sync.Map // shoot name → struct{}
}

// Finalizer is what the Gardener holds every Shoot with.
const Finalizer = "gardener"

// FailRegion is the region whose Shoots' creation fails for good.
const FailRegion = "fail-region"

// Regions whose Shoots' creation fails as a real garden reports it, with Gardener's error
// codes (status.lastErrors): UnauthorizedRegion for good (the credential lacks rights,
// Failed), DepletedRegion for now (the zone has no capacity, Error: Gardener retries).
const (
	UnauthorizedRegion = "unauthorized-region"
	DepletedRegion     = "depleted-region"
)

// failures are the operation state and last error of the failing regions.
var failures = map[string]struct {
	state, description, code string
}{
	UnauthorizedRegion: {"Failed", "task \"Deploying Shoot infrastructure\" failed: UnauthorizedOperation: You are not authorized to perform this operation", "ERR_INFRA_UNAUTHORIZED"},
	DepletedRegion:     {"Error", "task \"Waiting until the Shoot worker nodes have been reconciled\" failed: InsufficientInstanceCapacity", "ERR_INFRA_RESOURCES_DEPLETED"},
}

// StartGardener runs the Gardener against the garden API server at cfg until ctx ends.
func StartGardener(ctx context.Context, cfg *rest.Config) (*Gardener, error) {
	// Its own logger (one that discards: logr.Discard has no sink, which the manager
	// replaces with the global one), and no priority queue (which logs to the global
	// logger): a test that sets no logger would get controller-runtime's complaint.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.New(crlog.NullLogSink{}),
		Controller: crconfig.Controller{UsePriorityQueue: ptr.To(false)}})
	if err != nil {
		return nil, err
	}
	g := &Gardener{client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("test-gardener").For(garden.NewShoot()).Complete(g); err != nil {
		return nil, err
	}
	go func() { _ = mgr.Start(ctx) }()
	return g, nil
}

// Reconcile walks one Shoot a step further.
func (g *Gardener) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := garden.NewShoot()
	if err := g.client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !s.GetDeletionTimestamp().IsZero() {
		if p := shoot.ProgressOf(s); p.Phase != shoot.PhaseDeleting {
			return reconcile.Result{}, g.report(ctx, s, "Delete", "Processing", 50)
		}
		controllerutil.RemoveFinalizer(s, Finalizer)
		return reconcile.Result{}, g.client.Update(ctx, s)
	}
	if controllerutil.AddFinalizer(s, Finalizer) {
		return reconcile.Result{}, g.client.Update(ctx, s)
	}
	if shoot.ProgressOf(s).Type == "Reconcile" {
		return reconcile.Result{}, nil // reconciles of a created shoot are played by the tests
	}
	if _, held := g.hold.Load(s.GetName()); held {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Processing", 30)
	}
	region, _, _ := unstructured.NestedString(s.Object, "spec", "region")
	if region == FailRegion {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Failed", 10)
	}
	if f, failing := failures[region]; failing {
		lastErrors := []any{map[string]any{"description": f.description, "taskID": "deploy-infrastructure", "codes": []any{f.code},
			"lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}}
		if err := unstructured.SetNestedSlice(s.Object, lastErrors, "status", "lastErrors"); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, g.report(ctx, s, "Create", f.state, 20)
	}
	if shoot.ProgressOf(s).Type == "" {
		return reconcile.Result{}, g.report(ctx, s, "Create", "Processing", 30)
	}
	return reconcile.Result{}, g.report(ctx, s, "Create", "Succeeded", 100)
}

// Hold keeps the shoot's creation at Processing until Release.
func (g *Gardener) Hold(shootName string) { g.hold.Store(shootName, struct{}{}) }

// Release lets a held shoot's creation finish.
func (g *Gardener) Release(namespace, shootName string) {
	g.hold.Delete(shootName)
	// Touch the Shoot so the gardener looks again.
	s := garden.NewShoot()
	s.SetNamespace(namespace)
	s.SetName(shootName)
	_ = g.client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/released":"true"}}}`)))
}

func (g *Gardener) report(ctx context.Context, s *unstructured.Unstructured, opType, state string, progress int64) error {
	if p := shoot.ProgressOf(s); p.Type == opType && p.State == state {
		return nil
	}
	op := map[string]any{"type": opType, "state": state, "progress": progress, "description": strings.ToLower(opType) + " " + strings.ToLower(state),
		"lastUpdateTime": time.Now().UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedMap(s.Object, op, "status", "lastOperation"); err != nil {
		return err
	}
	// As gardenlet records the generation each operation reconciled.
	if err := unstructured.SetNestedField(s.Object, s.GetGeneration(), "status", "observedGeneration"); err != nil {
		return err
	}
	return g.client.Status().Update(ctx, s)
}
