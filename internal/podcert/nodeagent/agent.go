// Package nodeagent is `trustplane node-agent`: kubelet's pod-certificate duty for one
// node, as a DaemonSet. It follows the pods bound to its node that ask for pod
// certificates, runs the podcert manager for each projection and writes each credential
// bundle atomically under <root>/<namespace>/<pod>/<volume>-<source>/credentialbundle.pem
// (and the projection's credentialBundlePath, keyPath and certificateChainPath beside it),
// or, with --layout=spiffe, as a SPIFFE Filesystem Delivery credential folder (spiffe.go).
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
	"path/filepath"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Annotations opting a pod in without a podCertificate projected volume source
// (api/certificates).
const (
	SignerAnnotation  = certificates.SignerAnnotation
	KeyTypeAnnotation = certificates.KeyTypeAnnotation
	// ServeAnnotation: "agent" asks this agent (not kubelet) to serve the pod's
	// podCertificate projected volumes.
	ServeAnnotation = certificates.ServeAnnotation
	// ServeAgent is ServeAnnotation's value.
	ServeAgent = certificates.ServeAgent
	// BundleFile is the file name of a credential bundle.
	BundleFile = "credentialbundle.pem"
)

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
	// writeFailed are the projections whose last write failed and was reported.
	writeFailed map[podcert.Key]bool
	// noSPIFFEID is the problem last reported of each projection whose certificate has no
	// SPIFFE ID (--layout=spiffe).
	noSPIFFEID map[podcert.Key]string
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
			// Only bundles of a rotation stage can be selected (selectTrustBundles); the
			// cache holds no others. (Watched only with --layout=spiffe.)
			&certificatesv1.ClusterTrustBundle{}: {Label: canaryingBundles},
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
	if opts.ClockOffsetFile != "" {
		opts.Clock = offsetFrom(ctx, opts.Clock, opts.ClockOffsetFile)
	}
	recorder := mgr.GetEventRecorder("trustplane-podcertificate-manager")
	a := &Agent{opts: opts, reader: mgr.GetCache(), files: newFiles(opts.Dir, opts.BundleMode, opts.BundleGID), recorder: recorder,
		uids: map[types.NamespacedName]types.UID{}, reported: map[types.NamespacedName]map[string]bool{}, problems: map[podcert.Key]string{},
		writeFailed: map[podcert.Key]bool{}, noSPIFFEID: map[podcert.Key]string{}}
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
	b := ctrl.NewControllerManagedBy(mgr).Named("podcertificate-manager").
		For(&corev1.Pod{}).
		Watches(&certificatesv1.PodCertificateRequest{}, podOfRequest)
	if opts.Layout == LayoutSPIFFE {
		// A changed trust bundle is written again to the folder of every pod served for
		// its signer, from the cache's watch: no polling.
		b = b.Watches(&certificatesv1.ClusterTrustBundle{}, handler.EnqueueRequestsFromMapFunc(a.podsOfSigner))
	}
	if err := b.Complete(a); err != nil {
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
// helps, and the pod's other projections are served meanwhile. A write that fails
// otherwise (a full disk) is reported and retried.
func (a *Agent) handleProjections(ctx context.Context, pod *corev1.Pod, projections map[podcert.Key]*corev1.PodCertificateProjection) error {
	var errs []error
	refusedAny := false
	for key, src := range projections {
		if err := a.handleProjection(ctx, pod, key, src); err != nil {
			errs = append(errs, err)
		}
		var refused *refusedError
		switch err := a.writeBundle(ctx, pod, key, src); {
		case errors.As(err, &refused):
			a.refuse(ctx, pod, key, refused)
			refusedAny = true
		case err != nil:
			a.reportWriteFailure(ctx, pod, key, err)
			errs = append(errs, err)
		default:
			a.mu.Lock()
			delete(a.writeFailed, key) // a write that fails again is reported again
			a.mu.Unlock()
		}
	}
	if !refusedAny { // a path cleared up and refused again later is reported again
		a.mu.Lock()
		delete(a.reported, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		a.mu.Unlock()
	}
	return errors.Join(errs...)
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
	return podcert.WithAnnotationProjection(pod)
}
