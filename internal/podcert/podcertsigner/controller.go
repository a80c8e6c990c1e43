// Package podcertsigner is a PodCertificateRequest signer backed by a CA in a Secret, so
// that pod certificates work end to end: it issues the requests for its signerName that
// come from live pods, within the API's rules, and denies the rest with a reason.
package podcertsigner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/certificates"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
	"github.com/trustplane/trustplane/internal/podcert"
)

// recorderName is the signer's Events' reporting controller.
const recorderName = "trustplane-" + Name

// Reconciler signs PodCertificateRequests.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	// Cached reads pods and nodes from the signer's own cache (podsAndNodes); what it
	// would deny is read again through APIReader. Nil: APIReader alone.
	Cached   client.Reader
	Recorder events.EventRecorder
	opts     Options
	policy   Policy

	// secrets reads the CA Secret from a cache limited to it (setupCA).
	secrets client.Reader
	// mu guards the CA rotation: the last good one, and the Secret it was read from.
	mu                         sync.Mutex
	rot                        *podcert.Rotation
	secret                     *corev1.Secret
	caVersion                  string
	badVersion, badNextVersion string
	// stale: a write of the Secret failed, so it is read again before the next signature.
	stale bool
	// published are the fingerprints of the CAs in the ClusterTrustBundle this signer
	// last applied: a CA signs only once it is among them.
	published map[string]bool
	// observing says that canaries are under observation: only then do the Events of
	// troubles wake the CA controller. troubles are their caches, by reason (canaries on).
	observing atomic.Bool
	troubles  map[string]client.Reader

	// waiting are the requests that wait for a usable CA and were told so (noteWaiting);
	// wake queues them again once one is loaded.
	waitMu  sync.Mutex
	waiting map[types.NamespacedName]bool
	wake    chan event.GenericEvent
}

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=podcertificaterequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=podcertificaterequests/status,verbs=update;patch
// Signs for its own signerName only (the default of --podcertificate-signer-signer-name; another name
// needs its own grant of sign and attest on signers).
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,verbs=sign,resourceNames=trustplane.io/pod-identity
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=podcert.trustplane.io,resources=podidentitypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// The CA Secret only (the default of --podcertificate-signer-ca-secret): read through a cache that
// selects it by name and updated by name. Create cannot be limited by name: RBAC sees no
// name on a create (it is in the body), so a rule with resourceNames never matches one.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update,resourceNames=trustplane-pod-identity-ca
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create

// Setup adds the signer to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts, err := opts.withSelectors()
	if err != nil {
		return nil, err
	}
	initMetrics(opts.SignerName)
	policy := opts.Policy()
	cached, err := podsAndNodes(mgr)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cached: cached, Recorder: mgr.GetEventRecorder(recorderName), opts: opts, policy: policy,
		wake: make(chan event.GenericEvent, 1)}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pcr, ok := o.(*certificatesv1.PodCertificateRequest)
		return ok && pcr.Spec.SignerName == opts.SignerName && !concluded(pcr)
	})
	if err := r.setupCA(mgr); err != nil {
		return nil, err
	}
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&certificatesv1.PodCertificateRequest{}, builder.WithPredicates(ours)).
		WatchesRawSource(source.Channel(r.wake, handler.EnqueueRequestsFromMapFunc(r.takeWaiting))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Complete(r)
}

// Reconcile issues or denies one request.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pcr := &certificatesv1.PodCertificateRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, pcr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pcr.Spec.SignerName != r.opts.SignerName || concluded(pcr) {
		return reconcile.Result{}, nil
	}
	now := r.opts.Clock.Now()
	sreq, beta, err := r.request(ctx, pcr)
	if err != nil {
		return reconcile.Result{}, err
	}
	bound, denial, err := r.checkPod(ctx, pcr)
	if err != nil {
		return reconcile.Result{}, err
	}
	if denial != nil {
		return reconcile.Result{}, r.deny(ctx, pcr, beta, denial, now)
	}
	sreq.NotAfterBound = bound
	if sreq.Identity, denial, err = r.identity(ctx, pcr); err != nil {
		return reconcile.Result{}, err
	} else if denial != nil {
		return reconcile.Result{}, r.deny(ctx, pcr, beta, denial, now)
	}
	issued, err := r.sign(ctx, sreq, now)
	if errors.As(err, &denial) {
		return reconcile.Result{}, r.deny(ctx, pcr, beta, denial, now)
	}
	var waiting *waitingForCA
	if errors.As(err, &waiting) { // retried with backoff, and at once when a CA is loaded
		r.noteWaiting(pcr, err)
		return reconcile.Result{}, err
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	cond := metav1.Condition{
		Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
		Reason: certificatesv1.PodCertificateRequestConditionTypeIssued, Message: "issued by " + r.opts.SignerName, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: pcr.Generation,
	}
	if beta != nil {
		beta.Status.CertificateChain = issued.Chain
		beta.Status.NotBefore = &metav1.Time{Time: issued.NotBefore}
		beta.Status.BeginRefreshAt = &metav1.Time{Time: issued.BeginRefreshAt}
		beta.Status.NotAfter = &metav1.Time{Time: issued.NotAfter}
		beta.Status.Conditions = append(beta.Status.Conditions, cond)
		if err := r.Client.Status().Update(ctx, beta); err != nil {
			return reconcile.Result{}, fmt.Errorf("recording the issued certificate: %w", err)
		}
	} else {
		pcr.Status.CertificateChain = issued.Chain
		pcr.Status.NotBefore = &metav1.Time{Time: issued.NotBefore}
		pcr.Status.BeginRefreshAt = &metav1.Time{Time: issued.BeginRefreshAt}
		pcr.Status.NotAfter = &metav1.Time{Time: issued.NotAfter}
		pcr.Status.Conditions = append(pcr.Status.Conditions, cond)
		if err := r.Client.Status().Update(ctx, pcr); err != nil {
			return reconcile.Result{}, fmt.Errorf("recording the issued certificate: %w", err)
		}
	}
	countRequest(r.opts.SignerName, outcomeIssued)
	log.FromContext(ctx).V(1).Info("issued", "pod", pcr.Spec.PodName, "notAfter", issued.NotAfter)
	return reconcile.Result{}, nil
}

// sign issues sreq at now (Sign), or returns a *Denial. Only the choice of the CA and the
// reservation of the certificate's lifetime in its rotation hold the CA lock: the proof of
// possession is checked before, and the certificate signed after, by the CA reserved,
// so that concurrent workers do not sign one at a time.
func (r *Reconciler) sign(ctx context.Context, sreq Request, now time.Time) (*Issued, error) {
	pub, err := sreq.Check(r.policy)
	if err != nil {
		return nil, err
	}
	var validity Validity
	ca, err := r.reserve(ctx, func(ca *CA) (time.Time, error) {
		var err error
		validity, err = ValidityOf(ca, sreq, r.policy, now)
		return validity.NotAfter, err
	})
	if err != nil {
		return nil, err
	}
	return Issue(ca, pub, sreq, r.policy, validity)
}

// request reads what the signer needs of pcr. A request created through v1beta1 by a
// Kubernetes 1.35/1.36 kubelet carries pkixPublicKey and proofOfPossession, which
// certificates.k8s.io/v1 cannot show (k8s.io/api certificates/v1 PodCertificateRequestSpec
// has only stubPKCS10Request; pkg/apis/certificates/v1 conversion drops the two fields):
// such a request has an empty stubPKCS10Request in v1, and is read again through v1beta1
// when the API server serves it (beta is then that object, and its status is written there).
func (r *Reconciler) request(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (Request, *certificatesv1beta1.PodCertificateRequest, error) {
	req := RequestOf(pcr)
	if len(pcr.Spec.StubPKCS10Request) != 0 {
		return req, nil, nil
	}
	beta := &certificatesv1beta1.PodCertificateRequest{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pcr), beta)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return req, nil, nil // v1beta1 not served: Sign denies the request for its missing proof
	case err != nil:
		return req, nil, fmt.Errorf("reading the request through v1beta1: %w", err)
	}
	//nolint:staticcheck // SA1019: the deprecated fields are what a v1beta1 client sent.
	req.PKIXPublicKey, req.ProofOfPossession = beta.Spec.PKIXPublicKey, beta.Spec.ProofOfPossession
	return req, beta, nil
}

// identity is what pcr's certificate carries besides its SPIFFE ID, by the
// PodIdentityPolicies of its namespace (IdentityOf), or a *Denial.
func (r *Reconciler) identity(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (Identity, *Denial, error) {
	policies := &podcertv1alpha1.PodIdentityPolicyList{}
	// Without the CRD there is no policy to allow anything: the SPIFFE ID alone.
	if err := r.Client.List(ctx, policies, client.InNamespace(pcr.Namespace)); err != nil && !meta.IsNoMatchError(err) {
		return Identity{}, nil, fmt.Errorf("listing the PodIdentityPolicies of namespace %s: %w", pcr.Namespace, err)
	}
	id, denial := IdentityOf(policies.Items, r.opts.SignerName, r.opts.ClusterDomain, pcr.Namespace, pcr.Spec.ServiceAccountName, pcr.Spec.UnverifiedUserAnnotations)
	return id, denial, nil
}

// checkNode denies requests from a node that is gone, or from an earlier node of the
// same name (its UID differs): a deleted node's credentials must not be renewed.
func (r *Reconciler) checkNode(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*Denial, error) {
	return r.checkCachedThenLive(func(reader client.Reader) (*Denial, error) {
		node := &corev1.Node{}
		err := reader.Get(ctx, client.ObjectKey{Name: string(pcr.Spec.NodeName)}, node)
		switch {
		case apierrors.IsNotFound(err):
			return &Denial{certificates.ReasonNodeNotFound, fmt.Sprintf("node %s does not exist", pcr.Spec.NodeName)}, nil
		case err != nil:
			return nil, fmt.Errorf("reading node %s: %w", pcr.Spec.NodeName, err)
		case node.UID != pcr.Spec.NodeUID:
			return &Denial{certificates.ReasonNodeMismatch, fmt.Sprintf("spec.nodeUID %q but node %s has UID %q: the node was replaced", pcr.Spec.NodeUID, pcr.Spec.NodeName, node.UID)}, nil
		}
		return nil, nil
	})
}

// checkPod denies requests that do not come from the pod they name, on its node. The API
// server checks this only when the requester is a node: NodeRestriction
// (admitPodCertificateRequest) holds a kubelet to its own node and cross-checks the pod,
// its UID and node; for anyone else (the node agent is a ServiceAccount) the registry
// checks the form alone. spec.nodeName is the requester's node for a kubelet
// (NodeRestriction) and for the node agent (its admission policy, config/node-agent), so
// a pod bound elsewhere is another node's pod and is refused here.
//
// A pod that is terminating but still exists is served (kubelet keeps refreshing until it
// is gone): bound is then its deletionTimestamp plus its deletion grace period, the
// latest a pod whose kubelet kills it on time can still run, with one more grace period
// of headroom for a slow kill (the API server already set deletionTimestamp to the
// delete time plus the grace period). Sign keeps the API's 1h minimum lifetime above it.
func (r *Reconciler) checkPod(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (time.Time, *Denial, error) {
	var pod *corev1.Pod
	denial, err := r.checkCachedThenLive(func(reader client.Reader) (*Denial, error) {
		pod = &corev1.Pod{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: pcr.Namespace, Name: pcr.Spec.PodName}, pod)
		switch {
		case apierrors.IsNotFound(err):
			return &Denial{certificates.ReasonPodNotFound, fmt.Sprintf("pod %s/%s does not exist", pcr.Namespace, pcr.Spec.PodName)}, nil
		case err != nil:
			return nil, err
		case pod.UID != pcr.Spec.PodUID:
			return &Denial{certificates.ReasonPodMismatch, fmt.Sprintf("spec.podUID %q but pod %s/%s has UID %q", pcr.Spec.PodUID, pod.Namespace, pod.Name, pod.UID)}, nil
		case string(pcr.Spec.NodeName) != pod.Spec.NodeName:
			return &Denial{certificates.ReasonPodMismatch, fmt.Sprintf("spec.nodeName %q but pod %s/%s is bound to node %q", pcr.Spec.NodeName, pod.Namespace, pod.Name, pod.Spec.NodeName)}, nil
		case pod.Spec.ServiceAccountName != pcr.Spec.ServiceAccountName:
			return &Denial{certificates.ReasonPodMismatch, fmt.Sprintf("spec.serviceAccountName %q but pod %s/%s runs as %q", pcr.Spec.ServiceAccountName, pod.Namespace, pod.Name, pod.Spec.ServiceAccountName)}, nil
		}
		return nil, nil
	})
	if denial != nil || err != nil {
		return time.Time{}, denial, err
	}
	if denial, err := r.checkNode(ctx, pcr); denial != nil || err != nil {
		return time.Time{}, denial, err
	}
	if pod.DeletionTimestamp == nil {
		return time.Time{}, nil, nil
	}
	grace := time.Duration(0)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return pod.DeletionTimestamp.Add(grace), nil, nil
}

func (r *Reconciler) deny(ctx context.Context, pcr *certificatesv1.PodCertificateRequest, beta *certificatesv1beta1.PodCertificateRequest, d *Denial, now time.Time) error {
	cond := metav1.Condition{
		Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: d.Reason, Message: d.Message, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: pcr.Generation,
	}
	var obj client.Object = pcr
	if beta != nil {
		beta.Status.Conditions, obj = append(beta.Status.Conditions, cond), beta
	} else {
		pcr.Status.Conditions = append(pcr.Status.Conditions, cond)
	}
	if err := r.Client.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("recording the denial: %w", err)
	}
	countRequest(r.opts.SignerName, outcomeDenied)
	r.Recorder.Eventf(pcr, nil, corev1.EventTypeWarning, certificatesv1.PodCertificateRequestConditionTypeDenied, "Sign", "%s", d.Error())
	return nil
}

func concluded(pcr *certificatesv1.PodCertificateRequest) bool {
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			return true
		}
	}
	return false
}
