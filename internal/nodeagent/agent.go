// Package nodeagent is `trustplane node-agent`: kubelet's pod-certificate duty for one
// node, as a DaemonSet. It follows the pods bound to its node that ask for pod
// certificates, runs the podcert manager for each projection and writes each credential
// bundle atomically under <root>/<namespace>/<pod>/<volume>-<source>/credentialbundle.pem
// (and the projection's credentialBundlePath, keyPath and certificateChainPath beside it).
//
// Which pods it serves (kubelet 1.35+ runs the same manager itself for every podCertificate
// projected volume, so serving those too would double every request and warning):
//   - pods with the SignerAnnotation (a projection kubelet never sees), always;
//   - the podCertificate projected volumes of pods annotated ServeAnnotation: "agent";
//   - the podCertificate projected volumes of every pod with --serve-all-pods, for nodes
//     whose kubelet does not serve them (older than 1.35, or the PodCertificateRequest
//     feature gate off, or no kubelet at all).
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
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Annotations opting a pod in without a podCertificate projected volume source.
const (
	SignerAnnotation  = "podcert.trustplane.io/signer-name"
	KeyTypeAnnotation = "podcert.trustplane.io/key-type"
	annotationVolume  = "podcert-annotation"
	// ServeAnnotation: "agent" asks this agent (not kubelet) to serve the pod's
	// podCertificate projected volumes.
	ServeAnnotation = "podcert.trustplane.io/serve"
	// ServeAgent is ServeAnnotation's value.
	ServeAgent = "agent"
	// BundleFile is the file name of a credential bundle.
	BundleFile = "credentialbundle.pem"
	// ReasonBundlePathRefused is the Warning event on a pod whose bundle path below --dir
	// holds something the agent did not make (a symbolic link, say): it writes nothing there.
	ReasonBundlePathRefused = "BundlePathRefused"
)

// Options are the agent's flags.
type Options struct {
	NodeName               string
	Dir                    string
	RefreshInterval        time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// ServeAllPods serves the podCertificate projected volumes of every pod on the node,
	// not only of those annotated ServeAnnotation: "agent".
	ServeAllPods bool
	// BundleMode is the mode of the credential files; directories get the matching
	// search (x) bits. BundleGID, when not -1, is the group of files and directories.
	BundleMode os.FileMode
	BundleGID  int
	// Clock and Jitter are injected by tests.
	Clock  clock.PassiveClock
	Jitter func() time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Dir: "/var/run/trustplane/podcerts", RefreshInterval: time.Minute,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081", Clock: clock.RealClock{},
		BundleMode: 0o600, BundleGID: -1}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "The node this agent serves (required; usually from the downward API).")
	fs.StringVar(&o.Dir, "dir", o.Dir, "Root of the credential bundles: <dir>/<namespace>/<pod>/<volume>-<source>/"+BundleFile+".")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", o.RefreshInterval, "How often every projection is re-checked (kubelet: 1m).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; '0' disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.BoolVar(&o.ServeAllPods, "serve-all-pods", o.ServeAllPods, "Serve the podCertificate projected volumes of every pod on the node. Only for nodes whose kubelet does not "+
		"serve them itself (kubelet older than 1.35, the PodCertificateRequest feature gate off, or no kubelet): a 1.35+ kubelet does, and both would request "+
		"and warn twice. Without it, only pods annotated "+ServeAnnotation+"="+ServeAgent+" (volumes) or "+SignerAnnotation+" (no volume needed) are served.")
	fs.Var((*fileMode)(&o.BundleMode), "bundle-mode", "Mode of the credential files, octal (e.g. 0640 lets the --bundle-gid group read them); directories get the matching x bits.")
	fs.IntVar(&o.BundleGID, "bundle-gid", o.BundleGID, "Group of the credential files and their directories (-1: the agent's own); give pods this gid (runAsGroup or supplementalGroups) to read them as non-root.")
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
	if o.BundleMode&^os.ModePerm != 0 || o.BundleMode&0o600 != 0o600 {
		return fmt.Errorf("--bundle-mode %#o: permission bits only, and the owner must read and write", uint32(o.BundleMode))
	}
	if o.BundleGID < -1 {
		return fmt.Errorf("--bundle-gid %d: a group id, or -1", o.BundleGID)
	}
	return nil
}

// fileMode is an octal flag.
type fileMode os.FileMode

func (m *fileMode) String() string { return fmt.Sprintf("%#o", uint32(*m)) }
func (m *fileMode) Type() string   { return "mode" }
func (m *fileMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("not an octal mode: %w", err)
	}
	*m = fileMode(v)
	return nil
}

// Agent runs the manager for one node's pods.
type Agent struct {
	opts     Options
	reader   client.Reader
	manager  *podcert.Manager
	files    *files
	recorder events.EventRecorder

	mu       sync.Mutex
	uids     map[types.NamespacedName]types.UID       // pods seen, to forget them when they go
	reported map[types.NamespacedName]map[string]bool // refused paths already reported, per pod
	problems map[podcert.Key]string                   // the problem last reported of each projection
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
	recorder := mgr.GetEventRecorder("trustplane-podcertificate-manager")
	a := &Agent{opts: opts, reader: mgr.GetCache(), files: newFiles(opts.Dir, opts.BundleMode, opts.BundleGID), recorder: recorder,
		uids: map[types.NamespacedName]types.UID{}, reported: map[types.NamespacedName]map[string]bool{}, problems: map[podcert.Key]string{}}
	api := &clusterAPI{client: mgr.GetClient(), cache: mgr.GetCache(), apiReader: mgr.GetAPIReader(), nodeName: opts.NodeName}
	a.manager = podcert.NewManager(api, recorder, opts.Clock, types.NodeName(opts.NodeName))
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
			return reconcile.Result{}, a.forget(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	if pod.Spec.NodeName != a.opts.NodeName { // never another node's pod, whatever the cache says
		return reconcile.Result{}, a.forget(ctx, req.NamespacedName)
	}
	// A terminating pod keeps and refreshes its credentials until it is gone, as with
	// kubelet: a long graceful shutdown must not lose the pod's identity.
	pod = a.served(pod)
	projections := podcert.Projections(pod)
	a.mu.Lock()
	uid, known := a.uids[req.NamespacedName]
	a.mu.Unlock()
	// A pod that no longer asks (its opt-in annotation removed), or a new pod under a
	// reused name, must not keep or inherit the old pod's credentials.
	if known && (len(projections) == 0 || uid != pod.UID) {
		if err := a.forget(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(projections) == 0 {
		return reconcile.Result{}, nil
	}
	a.mu.Lock()
	a.uids[req.NamespacedName] = pod.UID
	a.mu.Unlock()
	if err := a.handleProjections(ctx, pod, projections); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: a.opts.RefreshInterval}, nil
}

// handleProjections advances every projection of pod and writes the bundles it has. A
// path the agent refuses to write through is reported, not retried: only its removal
// helps, and the pod's other projections are served meanwhile.
func (a *Agent) handleProjections(ctx context.Context, pod *corev1.Pod, projections map[podcert.Key]*corev1.PodCertificateProjection) error {
	var errs []error
	refusedAny := false
	for key, src := range projections {
		if err := a.handleProjection(ctx, pod, key, src); err != nil {
			errs = append(errs, err)
		}
		var refused *refusedError
		switch err := a.writeBundle(key, src); {
		case errors.As(err, &refused):
			a.refuse(ctx, pod, key, refused)
			refusedAny = true
		case err != nil:
			errs = append(errs, err)
		}
	}
	if !refusedAny { // a path cleared up and refused again later is reported again
		a.mu.Lock()
		delete(a.reported, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		a.mu.Unlock()
	}
	return errors.Join(errs...)
}

// writeBundle writes, in the projection's directory, credentialbundle.pem and the
// projection's credentialBundlePath (the PKCS#8 key then the chain, leaf first), keyPath
// (the key) and certificateChainPath (the chain); nothing before issuance. Denied or
// failed, the files of the last issued credential stay.
func (a *Agent) writeBundle(key podcert.Key, src *corev1.PodCertificateProjection) error {
	privateKey, chain, err := a.manager.Bundle(key)
	if err != nil {
		return nil // not issued yet, or denied/failed: the events and metrics say so
	}
	bundle := append(append([]byte(nil), privateKey...), chain...)
	// Each file is replaced atomically, not the set: the key and chain files first,
	// credentialbundle.pem last, so that its presence says the others are there.
	type file struct {
		name    string
		content []byte
	}
	var files []file
	for _, f := range []file{{src.KeyPath, privateKey}, {src.CertificateChainPath, chain}, {src.CredentialBundlePath, bundle}} {
		if f.name == "" {
			continue
		}
		if !filepath.IsLocal(f.name) {
			return fmt.Errorf("pod %s/%s volume %s: path %q leaves the volume", key.Namespace, key.PodName, key.VolumeName, f.name)
		}
		files = append(files, file{filepath.Clean(f.name), f.content})
	}
	files = append(files, file{BundleFile, bundle})
	dir := filepath.Join(key.Namespace, key.PodName, key.VolumeName+"-"+strconv.Itoa(key.SourceIndex))
	for _, f := range files {
		if err := a.files.write(filepath.Join(dir, f.name), f.content); err != nil {
			return err
		}
	}
	return nil
}

// refuse reports, once per pod and path, a bundle path the agent does not write through
// (a link planted in the pod's directory, say): in its log and as a Warning event on the
// pod. Nothing a retry could fix, so it is not retried before the refresh interval.
func (a *Agent) refuse(ctx context.Context, pod *corev1.Pod, key podcert.Key, refused *refusedError) {
	name := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	a.mu.Lock()
	if a.reported[name] == nil {
		a.reported[name] = map[string]bool{}
	}
	seen := a.reported[name][refused.Path]
	a.reported[name][refused.Path] = true
	a.mu.Unlock()
	if seen {
		return
	}
	log.FromContext(ctx).Info("not writing a credential bundle", "volume", key.VolumeName, "path", refused.Path, "reason", refused.Why)
	a.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonBundlePathRefused, "WriteBundle",
		"credential bundle of volume %s not written: %s below the agent's directory: %s", key.VolumeName, refused.Path, refused.Why)
}

func (a *Agent) forget(ctx context.Context, pod types.NamespacedName) error {
	a.mu.Lock()
	uid, ok := a.uids[pod]
	delete(a.uids, pod)
	delete(a.reported, pod)
	a.mu.Unlock()
	a.forgetProblems(pod)
	if ok {
		a.manager.Forget(pod.Namespace, pod.Name, string(uid))
	}
	err := a.files.removeAll(filepath.Join(pod.Namespace, pod.Name))
	var refused *refusedError
	if errors.As(err, &refused) { // a link on the way: nothing a retry could fix
		log.FromContext(ctx).Info("not removing a pod's credentials", "path", refused.Path, "reason", refused.Why)
		return nil
	}
	return err
}

// served is the pod as this agent serves it: with the annotation projection when opted
// in by SignerAnnotation, and without its podCertificate volume sources when kubelet
// serves them (not --serve-all-pods, no ServeAnnotation: "agent"). Source indices stay.
func (a *Agent) served(pod *corev1.Pod) *corev1.Pod {
	if !a.opts.ServeAllPods && pod.Annotations[ServeAnnotation] != ServeAgent && len(podcert.Projections(pod)) > 0 {
		pod = pod.DeepCopy()
		for _, vol := range pod.Spec.Volumes {
			if vol.Projected == nil {
				continue
			}
			for i := range vol.Projected.Sources {
				vol.Projected.Sources[i].PodCertificate = nil
			}
		}
	}
	return withAnnotationProjection(pod)
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
		pods = append(pods, s.agent.served(&list.Items[i]))
	}
	for k, n := range s.agent.manager.Report(pods) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n), k.SignerName, k.State)
	}
}
