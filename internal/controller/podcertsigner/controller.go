// Package podcertsigner is a PodCertificateRequest signer backed by a CA in a Secret, so
// that pod certificates work end to end: it issues the requests for its signerName that
// come from live pods, within the API's rules, and denies the rest with a reason.
package podcertsigner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/spf13/pflag"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/internal/manager"
)

// Name is the controller's name in --controllers.
const Name = "podcertificate-signer"

// Options are the controller's flags.
type Options struct {
	SignerName   string
	CANamespace  string
	CASecretName string
	MaxLifetime  time.Duration
	KeyTypes     []string
	TrustDomain  string
	Workers      int
	Clock        clock.PassiveClock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		SignerName: "trustplane.io/pod-identity", CANamespace: manager.OwnNamespace(), CASecretName: "trustplane-pod-identity-ca",
		MaxLifetime: 24 * time.Hour, KeyTypes: []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"},
		TrustDomain: "cluster.local", Workers: 16, Clock: clock.RealClock{},
	}
}

// AddFlags registers the options as flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SignerName, "podcert-signer-name", o.SignerName, "signerName whose PodCertificateRequests this signer issues.")
	fs.StringVar(&o.CANamespace, "podcert-ca-namespace", o.CANamespace, "Namespace of the CA Secret (default: the manager's own).")
	fs.StringVar(&o.CASecretName, "podcert-ca-secret", o.CASecretName, "kubernetes.io/tls Secret holding the CA; created with a new self-signed P-256 CA when absent, never overwritten.")
	fs.DurationVar(&o.MaxLifetime, "podcert-max-lifetime", o.MaxLifetime, "Longest certificate lifetime issued (at least 1h, as the API requires).")
	fs.StringSliceVar(&o.KeyTypes, "podcert-key-types", o.KeyTypes, "Key types issued; others are denied UnsupportedKeyType.")
	fs.StringVar(&o.TrustDomain, "podcert-trust-domain", o.TrustDomain, "Trust domain of the SPIFFE ID URI SAN (spiffe://<domain>/ns/<ns>/sa/<sa>).")
	fs.IntVar(&o.Workers, "podcert-signer-workers", o.Workers, "Concurrent signings.")
}

// Controller is the registry entry for `trustplane manager`.
func Controller() manager.Controller {
	opts := DefaultOptions()
	return manager.Controller{
		Name: Name, Help: "PodCertificateRequest signer backed by a CA Secret",
		AddFlags: opts.AddFlags,
		Setup:    func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err },
	}
}

// Reconciler signs PodCertificateRequests.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	opts      Options
	policy    Policy

	mu        sync.Mutex
	ca        *CA
	caVersion string
}

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=podcertificaterequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=podcertificaterequests/status,verbs=update;patch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,verbs=sign
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create

// Setup adds the signer to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.MaxLifetime < time.Hour {
		return nil, fmt.Errorf("--podcert-max-lifetime must be at least 1h, not %v", opts.MaxLifetime)
	}
	policy := Policy{MaxLifetime: opts.MaxLifetime, KeyTypes: map[string]bool{}, TrustDomain: opts.TrustDomain}
	for _, kt := range opts.KeyTypes {
		policy.KeyTypes[kt] = true
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("trustplane-" + Name), opts: opts, policy: policy}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pcr, ok := o.(*certificatesv1.PodCertificateRequest)
		return ok && pcr.Spec.SignerName == opts.SignerName && !concluded(pcr)
	})
	return r, ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&certificatesv1.PodCertificateRequest{}, builder.WithPredicates(ours)).
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
	if denial, err := r.checkPod(ctx, pcr); err != nil {
		return reconcile.Result{}, err
	} else if denial != nil {
		return reconcile.Result{}, r.deny(ctx, pcr, denial, now)
	}
	ca, err := r.loadCA(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	issued, err := Sign(ca, pcr, r.policy, now)
	var denial *Denial
	if errors.As(err, &denial) {
		return reconcile.Result{}, r.deny(ctx, pcr, denial, now)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	pcr.Status.CertificateChain = issued.Chain
	pcr.Status.NotBefore = &metav1.Time{Time: issued.NotBefore}
	pcr.Status.BeginRefreshAt = &metav1.Time{Time: issued.BeginRefreshAt}
	pcr.Status.NotAfter = &metav1.Time{Time: issued.NotAfter}
	pcr.Status.Conditions = append(pcr.Status.Conditions, metav1.Condition{
		Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
		Reason: "Issued", Message: "issued by " + r.opts.SignerName, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: pcr.Generation,
	})
	if err := r.Client.Status().Update(ctx, pcr); err != nil {
		return reconcile.Result{}, fmt.Errorf("recording the issued certificate: %w", err)
	}
	log.FromContext(ctx).V(1).Info("issued", "pod", pcr.Spec.PodName, "notAfter", issued.NotAfter)
	return reconcile.Result{}, nil
}

// checkPod denies requests that do not come from the live pod they name, on its node.
func (r *Reconciler) checkPod(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*Denial, error) {
	pod := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: pcr.Namespace, Name: pcr.Spec.PodName}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return &Denial{"PodNotFound", fmt.Sprintf("pod %s/%s does not exist", pcr.Namespace, pcr.Spec.PodName)}, nil
	case err != nil:
		return nil, err
	case pod.DeletionTimestamp != nil:
		return &Denial{"PodTerminating", fmt.Sprintf("pod %s/%s is being deleted", pcr.Namespace, pcr.Spec.PodName)}, nil
	case pod.UID != pcr.Spec.PodUID:
		return &Denial{"PodMismatch", "the pod's UID differs from spec.podUID"}, nil
	case string(pcr.Spec.NodeName) != pod.Spec.NodeName:
		return &Denial{"PodMismatch", fmt.Sprintf("the pod is not bound to node %s", pcr.Spec.NodeName)}, nil
	case pod.Spec.ServiceAccountName != pcr.Spec.ServiceAccountName:
		return &Denial{"PodMismatch", "the pod runs as another service account"}, nil
	}
	return nil, nil
}

func (r *Reconciler) deny(ctx context.Context, pcr *certificatesv1.PodCertificateRequest, d *Denial, now time.Time) error {
	pcr.Status.Conditions = append(pcr.Status.Conditions, metav1.Condition{
		Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: d.Reason, Message: d.Message, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: pcr.Generation,
	})
	if err := r.Client.Status().Update(ctx, pcr); err != nil {
		return fmt.Errorf("recording the denial: %w", err)
	}
	r.Recorder.Eventf(pcr, nil, corev1.EventTypeWarning, "Denied", "Sign", "%s", d.Error())
	return nil
}

// loadCA reads the CA Secret (parsing again only when it changed), creating it with a
// new self-signed CA when it does not exist. An existing Secret is never overwritten.
func (r *Reconciler) loadCA(ctx context.Context) (*CA, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName}
	err := r.APIReader.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		if secret, err = r.bootstrapCA(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading CA Secret %s: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ca != nil && r.caVersion == secret.ResourceVersion {
		return r.ca, nil
	}
	ca, err := ParseCA(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	r.ca, r.caVersion = ca, secret.ResourceVersion
	return ca, nil
}

func (r *Reconciler) bootstrapCA(ctx context.Context) (*corev1.Secret, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := r.opts.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: r.opts.SignerName + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.CANamespace, Name: r.opts.CASecretName, Labels: map[string]string{"app.kubernetes.io/managed-by": "trustplane"}},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		},
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica was first: use theirs
			return secret, r.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), secret)
		}
		return nil, fmt.Errorf("creating CA Secret: %w", err)
	}
	log.FromContext(ctx).Info("created a self-signed CA for pod certificates", "secret", r.opts.CANamespace+"/"+r.opts.CASecretName)
	return secret, nil
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
