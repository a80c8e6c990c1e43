// Package jwks is the JWKSConfig controller: it publishes the public key of a TLS Secret
// as a JWK Set in a ConfigMap, rotates keys gracefully, runs nginx to serve the set, and
// runs trustplane's own JWKS server (internal/jwks/jwkshttp) beside it.
//
// controller.go holds the Reconciler and its skeleton: get, finalizer, publish, status.
// phases.go lists the phases of a publication over one scope; each phase lives, with its
// helpers, in the file of what it reads or writes: spec.go (checkSpec), issuer.go
// (claimIssuer, over internal/jwks/issuerclaim), secret.go (readSecret), configmap.go
// (readPublished, writeSet, removeRenamed), signing.go (readSigning, promote), plan.go
// (planSet), nginx.go (applyNginx), status.go (recordKeys, checkServed). finalize.go
// deletes; writes.go holds the writes every phase shares; resources.go the desired
// objects (pure). watches.go holds the indexes and event mappers setup.go wires;
// options.go the flags.
package jwks

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/finalizer"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/relyingparty"
	"github.com/trustplane/trustplane/internal/status"
)

// FieldOwner is the server-side apply field manager of everything this controller writes.
const FieldOwner = "trustplane-jwks"

// Finalizer holds a JWKSConfig until its nginx objects (and, with cleanupOnDelete, its
// ConfigMap) are gone: "jwks.trustplane.io/finalizer".
var Finalizer = finalizer.For(Name)

// Reconciler reconciles JWKSConfig objects.
type Reconciler struct {
	// Client reads JWKSConfigs from the manager's cache and writes.
	Client client.Client
	// Owned reads the objects the controller made, from its private label-scoped cache.
	Owned client.Reader
	// OwnedIndexed says Owned indexes ConfigMaps by ownerIndex (Setup's cache); false
	// (a plain client, in tests) selects them by label.
	OwnedIndexed bool
	// SecretMetadata reads Secrets' metadata from the manager's Secret watch (metadata
	// only), to skip reading a Secret that has not changed since its key was parsed. Nil:
	// every reconcile reads the Secret.
	SecretMetadata client.Reader
	// APIReader reads Secrets (never cached: private keys stay out of memory), once a
	// ConfigMap to adopt that is not labelled yet, and the objects to delete when finalizing.
	APIReader client.Reader
	// Recorder emits events through the events.k8s.io API.
	Recorder events.EventRecorder
	// Clock is injected so tests control rotation time.
	Clock clock.PassiveClock
	// Throttle spaces out ConfigMap updates of one set.
	Throttle *Throttle
	// NginxImage is the image of every nginx Deployment: the operator's choice, never a
	// tenant's (--jwks-nginx-image).
	NginxImage string
	// Claims records which JWKSConfig serves an issuer (internal/jwks/issuerclaim).
	Claims *issuerclaim.Claims
	// Limits bound what a JWKSConfig author may ask for: the operator's settings.
	Limits Limits
	// PromotionMargin is added to cacheMaxAge before a served key is promoted to
	// spec.signingSecret (--jwks-promotion-margin).
	PromotionMargin time.Duration
	// Servers reads the JWKS servers' Leases in ServerNamespace (the manager's), where
	// each reports the keys waiting to sign that it answers (jwkshttp, report.go): a key
	// is promoted only once every server whose report holds answers it. Nil: no server
	// reports (tests), and the controller's own cache alone says what is served.
	Servers         client.Reader
	ServerNamespace string
	// RelyingParties probes and reads the relying parties of spec.promotion, every
	// ScrapeInterval while a key is pending, on the hosts RelyingPartyHosts allows
	// (proof.go).
	RelyingParties    relyingparty.Client
	RelyingPartyHosts []string
	ScrapeInterval    time.Duration

	parsed    sync.Map // types.NamespacedName → parsedCert
	ownWrites ownWrites
}

// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=jwksconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
//
// The JWKS servers' reports (jwkshttp, report.go): the controller reads them, the
// manager's own server writes its own.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
//
// The ValidatingAdmissionPolicy trustplane-owner-labels (config/policy/owner-labels.yaml)
// lets only who holds this permission set jwksv1alpha1.OwnerLabel: no such resource exists, the
// policy asks the authorizer for it.
//
// +kubebuilder:rbac:groups=jwks.trustplane.io,resources=ownerlabels,verbs=update

// Reconcile follows the seed's phases: get, finalizer, read the Secret, compute the set,
// apply the ConfigMap, apply nginx, record the outcome, one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting JWKSConfig: %w", err)
	}
	patcher := status.NewPatcher(cfg)
	result, err := r.reconcile(ctx, cfg)
	return patcher.Finish(ctx, r.Client, r.Recorder, result, err)
}

// reconcile publishes the set (or finalizes a deleted JWKSConfig) and marks it Ready; any
// other outcome is its error.
func (r *Reconciler) reconcile(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) (ctrl.Result, error) {
	if !cfg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, cfg)
	}
	if deletionHasWork(cfg) {
		if err := Finalizer.Ensure(ctx, r.Client, cfg); err != nil {
			return ctrl.Result{}, err
		}
	}
	result, err := r.publish(ctx, cfg, r.Clock.Now().Truncate(time.Second))
	if err != nil {
		return ctrl.Result{}, r.stallOnInputError(err)
	}
	status.MarkReady(cfg, jwksv1alpha1.ReasonPublished, fmt.Sprintf("Publishing %d key(s); current kid %s", cfg.Status.KeyCount, cfg.Status.LastKeyID))
	return result, nil
}

// deletionHasWork says whether deleting cfg leaves anything to do, so that it needs the
// finalizer before anything is made: nginx objects to remove, the set to delete
// (cleanupOnDelete), an issuer claim to release. One that needs none (nginx off, no
// issuer; the set stays for relying parties) goes at once and costs no finalizer write.
// A finalizer once added stays until deletion (and a legacy name is still replaced): a
// spec that stops needing it may still hold a claim being released.
func deletionHasWork(cfg *jwksv1alpha1.JWKSConfig) bool {
	return jwkset.NginxEnabled(cfg) || cfg.Spec.CleanupOnDelete || cfg.Spec.Issuer != "" || Finalizer.Held(cfg)
}

func (r *Reconciler) forget(id types.NamespacedName) {
	r.parsed.Delete(id)
	r.ownWrites.forget(id)
	r.Throttle.Forget(id)
	publishedKeys.DeleteLabelValues(id.Namespace, id.Name)
	certificateNotAfter.DeleteLabelValues(id.Namespace, id.Name)
	status.Forget(&jwksv1alpha1.JWKSConfig{}, id)
}
