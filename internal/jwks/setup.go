package jwks

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkshttp"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/status"
)

// Name is the controller's name in --controllers.
const Name = "jwks"

// Help is the controller's line in --help.
const Help = "JWKSConfig: TLS Secret → JWK Set ConfigMap, nginx, and trustplane's own JWKS server"

// RetryLimiter is the backoff of transient errors: base, 2×base, 4×base, … up to max.
func RetryLimiter(base, maxDelay time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, maxDelay)
}

// Setup adds the controller and, unless --jwks-server-bind-address is 0, the JWKS server
// to mgr. Its collectors (Collectors) are registered by whoever runs it.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	limits, err := opts.limits()
	if err != nil {
		return nil, err
	}
	owned, claimCache, claims, err := addCaches(mgr, opts)
	if err != nil {
		return nil, err
	}
	if err := owned.IndexField(context.Background(), &corev1.ConfigMap{}, ownerIndex, ownerIndexOf); err != nil {
		return nil, fmt.Errorf("indexing ConfigMaps by JWKSConfig: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &jwksv1alpha1.JWKSConfig{}, secretIndex, secretIndexOf); err != nil {
		return nil, fmt.Errorf("indexing JWKSConfigs by Secret: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &jwksv1alpha1.JWKSConfig{}, objectNameIndex, objectNameIndexOf); err != nil {
		return nil, fmt.Errorf("indexing JWKSConfigs by ConfigMap name: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &jwksv1alpha1.JWKSConfig{}, awaitingIndex, awaitingIndexOf); err != nil {
		return nil, fmt.Errorf("indexing JWKSConfigs by key awaiting the servers: %w", err)
	}
	// The JWKS servers' reports (jwkshttp, report.go): a key signs only once every server
	// answers it.
	servers, err := labelledCache(mgr, jwksv1alpha1.ServerLabel, opts.IssuerClaimNamespace)
	if err != nil {
		return nil, err
	}
	if err := manager.AddCache(mgr, servers); err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client:       mgr.GetClient(),
		Owned:        owned,
		OwnedIndexed: true,
		APIReader:    mgr.GetAPIReader(),
		// The cache WatchesMetadata below fills: it holds the Secrets' metadata only.
		SecretMetadata: mgr.GetCache(),
		Recorder:       mgr.GetEventRecorder("trustplane-" + Name),
		Clock:          opts.Clock,
		Throttle:       NewThrottle(opts.MinUpdateInterval),
		NginxImage:     opts.NginxImage,
		Claims:         claims,
		Limits:         limits,

		PromotionMargin: opts.PromotionMargin,
		Servers:         servers,
		ServerNamespace: opts.IssuerClaimNamespace,

		RelyingPartyHosts: opts.RelyingPartyHosts,
		ScrapeInterval:    opts.RelyingPartyScrapeInterval,
	}
	toOwner := handler.EnqueueRequestsFromMapFunc(configOfOwned)
	err = ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&jwksv1alpha1.JWKSConfig{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, status.ReconcileRequested))).
		WatchesMetadata(&corev1.Secret{}, r.secretEvents()).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.ConfigMap{}), r.ownWrites.notAnEcho(handler.EnqueueRequestsFromMapFunc(r.configsForConfigMap)))).
		WatchesRawSource(source.Kind(owned, client.Object(&appsv1.Deployment{}), toOwner)).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.Service{}), toOwner)).
		WatchesRawSource(source.Kind(claimCache, client.Object(&corev1.ConfigMap{}), handler.EnqueueRequestsFromMapFunc(r.configsForClaim))).
		WatchesRawSource(source.Kind(servers, client.Object(&coordinationv1.Lease{}), r.serverReports())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.Workers,
			RateLimiter:             RetryLimiter(opts.RetryBaseDelay, opts.RetryMaxDelay),
		}).
		Complete(r)
	if err != nil {
		return nil, err
	}
	if opts.serverEnabled() {
		if _, err := addServer(mgr, opts, owned, claimCache, claims); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// SetupServer adds the JWKS server alone to mgr: `trustplane jwks-server`, a Deployment of
// its own, so that no client exhausting it can stop the controllers. Its collectors are
// jwkshttp.Collectors().
func SetupServer(mgr ctrl.Manager, opts Options) (*jwkshttp.Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if !opts.serverEnabled() {
		return nil, fmt.Errorf("--jwks-server-bind-address must name an address")
	}
	owned, claimCache, claims, err := addCaches(mgr, opts)
	if err != nil {
		return nil, err
	}
	return addServer(mgr, opts, owned, claimCache, claims)
}

// addCaches adds the private caches of the controller and the server to mgr: what the
// controller made (OwnerLabel, a label only trustplane may set: config/policy), and the
// issuer claims. It also indexes JWKSConfigs by issuer.
func addCaches(mgr ctrl.Manager, opts Options) (owned, claimCache cache.Cache, claims *issuerclaim.Claims, err error) {
	owned, err = labelledCache(mgr, jwksv1alpha1.OwnerLabel, "")
	if err != nil {
		return nil, nil, nil, err
	}
	if err := manager.AddCache(mgr, owned); err != nil {
		return nil, nil, nil, err
	}
	claimCache, err = labelledCache(mgr, jwksv1alpha1.IssuerClaimLabel, opts.IssuerClaimNamespace)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := manager.AddCache(mgr, claimCache); err != nil {
		return nil, nil, nil, err
	}
	if claims, err = opts.issuerClaims(claimCache); err != nil {
		return nil, nil, nil, err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &jwksv1alpha1.JWKSConfig{}, issuerclaim.KeyIndex, issuerclaim.KeyIndexOf); err != nil {
		return nil, nil, nil, fmt.Errorf("indexing JWKSConfigs by issuer: %w", err)
	}
	return owned, claimCache, claims, nil
}

// addServer adds the JWKS server to mgr, reading from the given caches.
func addServer(mgr ctrl.Manager, opts Options, owned, claimCache cache.Cache, claims *issuerclaim.Claims) (*jwkshttp.Server, error) {
	proxies, err := jwkshttp.ParseTrustedProxies(opts.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("--jwks-server-trusted-proxies: %w", err)
	}
	// Its reports are read and written as they are, not through a cache: it reads no
	// other server's.
	reports, err := client.New(mgr.GetConfig(), client.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("JWKS server: %w", err)
	}
	srv := &jwkshttp.Server{
		Addr: opts.ServerBindAddress, Configs: mgr.GetCache(), ConfigMaps: owned,
		ConfigInformers: mgr.GetCache(), ConfigMapInformers: owned, ClaimInformers: claimCache,
		Claims: claims, TrustedProxies: proxies, MaxCacheMaxAge: opts.MaxCacheMaxAge, Limits: opts.serverLimits(),
		Reports: reports, ReportNamespace: opts.IssuerClaimNamespace,
	}
	return srv, mgr.Add(srv)
}

// labelledCache is a cache of only the objects that carry label (in namespace, when it is
// not ""): the objects this controller made (OwnerLabel), so the manager does not hold
// every ConfigMap, Deployment and Service of the cluster in memory, or the issuer claims.
func labelledCache(mgr ctrl.Manager, label, namespace string) (cache.Cache, error) {
	has, err := labels.NewRequirement(label, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*has),
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return cache.New(mgr.GetConfig(), opts)
}
