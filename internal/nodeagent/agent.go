// Package nodeagent is `trustplane node-agent`: kubelet's pod-certificate duty for one
// node, as a DaemonSet. It follows the pods bound to its node that ask for pod
// certificates, runs the podcert manager for each projection and writes each credential
// bundle atomically under <root>/<namespace>/<pod>/<volume>-<source>/credentialbundle.pem.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/atomicfile"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Annotations opting a pod in without a podCertificate projected volume source.
const (
	SignerAnnotation  = "podcert.trustplane.io/signer-name"
	KeyTypeAnnotation = "podcert.trustplane.io/key-type"
	annotationVolume  = "podcert-annotation"
	// BundleFile is the file name of a credential bundle.
	BundleFile = "credentialbundle.pem"
)

// Options are the agent's flags.
type Options struct {
	NodeName               string
	Dir                    string
	RefreshInterval        time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// Clock and Jitter are injected by tests.
	Clock  clock.PassiveClock
	Jitter func() time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Dir: "/var/run/trustplane/podcerts", RefreshInterval: time.Minute,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081", Clock: clock.RealClock{}}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "The node this agent serves (required; usually from the downward API).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Root of the credential bundles: <dir>/<namespace>/<pod>/<volume>-<source>/"+BundleFile+".")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", o.RefreshInterval, "How often every projection is re-checked (kubelet: 1m).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
}

// Validate checks the options before anything connects. A pointer receiver: the command
// binds opts.Validate before the flags are parsed into opts.
func (o *Options) Validate() error {
	if o.NodeName == "" {
		return errors.New("--node-name is required")
	}
	if o.Dir == "" {
		return errors.New("--dir is required")
	}
	return nil
}

// Agent runs the manager for one node's pods.
type Agent struct {
	opts    Options
	reader  client.Reader
	manager *podcert.Manager

	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID // pods seen, to forget them when they go
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	onNode := fields.OneTermEqualSelector("spec.nodeName", opts.NodeName)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                           {Field: onNode},
			&certificatesv1.PodCertificateRequest{}: {Field: onNode},
			&corev1.Node{}:                          {Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName)},
		}},
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating the node agent: %w", err)
	}
	// Ready once it knows its node's pods and requests: before that it would answer for none.
	if err := manager.AddProbes(mgr, manager.CachesSynced(mgr)); err != nil {
		return err
	}
	a := &Agent{opts: opts, reader: mgr.GetCache(), uids: map[types.NamespacedName]types.UID{}}
	api := &clusterAPI{client: mgr.GetClient(), cache: mgr.GetCache(), apiReader: mgr.GetAPIReader(), nodeName: opts.NodeName}
	a.manager = podcert.NewManager(api, mgr.GetEventRecorder("trustplane-podcertificate-manager"), opts.Clock, types.NodeName(opts.NodeName))
	if opts.Jitter != nil {
		a.manager.SetJitter(opts.Jitter)
	}
	if err := registerStates(a); err != nil {
		return err
	}
	podOfRequest := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pcr := o.(*certificatesv1.PodCertificateRequest)
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pcr.Namespace, Name: pcr.Spec.PodName}}}
	})
	err = ctrl.NewControllerManagedBy(mgr).Named("podcertificate-manager").
		For(&corev1.Pod{}).
		Watches(&certificatesv1.PodCertificateRequest{}, podOfRequest).
		Complete(a)
	if err != nil {
		return err
	}
	return manager.Run(ctx, mgr)
}

// Reconcile handles every projection of one pod, writes the bundles it has, and comes
// back after the refresh interval (kubelet's refresh pass).
func (a *Agent) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := a.reader.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, a.forget(req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	if pod.DeletionTimestamp != nil {
		return reconcile.Result{}, a.forget(req.NamespacedName)
	}
	pod = withAnnotationProjection(pod)
	projections := podcert.Projections(pod)
	a.mu.Lock()
	uid, known := a.uids[req.NamespacedName]
	a.mu.Unlock()
	// A pod that no longer asks (its opt-in annotation removed), or a new pod under a
	// reused name, must not keep or inherit the old pod's credentials.
	if known && (len(projections) == 0 || uid != pod.UID) {
		if err := a.forget(req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(projections) == 0 {
		return reconcile.Result{}, nil
	}
	a.mu.Lock()
	a.uids[req.NamespacedName] = pod.UID
	a.mu.Unlock()
	var errs []error
	for key := range projections {
		if err := a.manager.Handle(ctx, pod, key); err != nil {
			errs = append(errs, err)
		}
		if err := a.writeBundle(key); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: a.opts.RefreshInterval}, nil
}

// writeBundle writes the PKCS#8 key then the chain, leaf first; nothing before issuance.
func (a *Agent) writeBundle(key podcert.Key) error {
	privateKey, chain, err := a.manager.Bundle(key)
	if err != nil {
		return nil // not issued yet, or denied/failed: the events and metrics say so
	}
	dir := filepath.Join(a.opts.Dir, key.Namespace, key.PodName, key.VolumeName+"-"+strconv.Itoa(key.SourceIndex))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, BundleFile), append(append([]byte(nil), privateKey...), chain...), 0o600)
}

func (a *Agent) forget(pod types.NamespacedName) error {
	a.mu.Lock()
	uid, ok := a.uids[pod]
	delete(a.uids, pod)
	a.mu.Unlock()
	if ok {
		a.manager.Forget(pod.Namespace, pod.Name, string(uid))
	}
	return os.RemoveAll(filepath.Join(a.opts.Dir, pod.Namespace, pod.Name))
}

// withAnnotationProjection gives an opted-in pod (SignerAnnotation) a projection even
// when its volumes do not ask for one.
func withAnnotationProjection(pod *corev1.Pod) *corev1.Pod {
	signer := pod.Annotations[SignerAnnotation]
	if signer == "" {
		return pod
	}
	keyType := pod.Annotations[KeyTypeAnnotation]
	if keyType == "" {
		keyType = "ECDSAP256"
	}
	pod = pod.DeepCopy()
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: annotationVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: keyType}}}}}})
	return pod
}

// clusterAPI is podcert.API over controller-runtime's client and caches.
type clusterAPI struct {
	client    client.Client
	cache     client.Reader
	apiReader client.Reader
	nodeName  string
}

func (c *clusterAPI) CreatePCR(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return pcr, c.client.Create(ctx, pcr)
}

func (c *clusterAPI) GetPCR(namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	pcr := &certificatesv1.PodCertificateRequest{}
	return pcr, c.cache.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pcr)
}

func (c *clusterAPI) ServiceAccountUID(ctx context.Context, namespace, name string) (types.UID, error) {
	sa := &corev1.ServiceAccount{}
	if err := c.apiReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
		return "", err
	}
	return sa.UID, nil
}

func (c *clusterAPI) NodeUID(ctx context.Context) (types.UID, error) {
	node := &corev1.Node{}
	if err := c.cache.Get(ctx, client.ObjectKey{Name: c.nodeName}, node); err != nil {
		return "", err
	}
	return node.UID, nil
}

// states is the kubelet metric: projections by signer and state, computed at scrape time.
type states struct {
	agent *Agent
	desc  *prometheus.Desc
}

func registerStates(a *Agent) error {
	s := &states{agent: a, desc: prometheus.NewDesc("trustplane_podcertificate_states",
		"Pod certificate projections on this node by signer_name and state (not_yet_issued, fresh, overdue_for_refresh, expired, denied, failed).",
		[]string{"signer_name", "state"}, nil)}
	err := metrics.Registry.Register(s)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) { // a second agent in one process (tests): report the newest
		metrics.Registry.Unregister(already.ExistingCollector)
		err = metrics.Registry.Register(s)
	}
	return err
}

func (s *states) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *states) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &corev1.PodList{}
	if err := s.agent.reader.List(ctx, list); err != nil {
		return
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, withAnnotationProjection(&list.Items[i]))
	}
	for k, n := range s.agent.manager.Report(pods) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n), k.SignerName, k.State)
	}
}
