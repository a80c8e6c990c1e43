// Package jwkshttp is trustplane's own JWKS HTTP server: it answers every published JWK
// Set (and, with an issuer, its discovery document) from a table that watch events of
// JWKSConfigs, their ConfigMaps and the issuer claims keep. The manager runs it on every
// replica (internal/jwks's Setup), `trustplane jwks-server` as a process of its own
// (internal/jwks/jwksserver). It reads, and writes only its own Lease, where it reports
// what it serves (report.go).
package jwkshttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/issuerclaim"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// Server serves every published set from a table kept by watch events (routes.go):
//
//	GET /<namespace>/<name>/jwks.json
//	GET /<namespace>/<name>/.well-known/openid-configuration   (when spec.issuer is set)
//	GET <issuer path>/jwks.json                                (on the issuer's host)
//	GET <issuer path>/.well-known/openid-configuration
//
// The first two are what a proxy that maps an issuer's root to /<namespace>/<name>/
// forwards; the last two what a path-preserving proxy forwards, with the issuer's own host
// and URL path. jwks_uri in the discovery document is always <issuer>/jwks.json, which
// resolves either way. A JWKSConfig with an issuer is served only while it holds that
// issuer's claim (internal/jwks/issuerclaim): one issuer, one JWKSConfig; and a host is answered only
// with the documents of issuers on that host (routeTable.lookup).
//
// It needs no leader election: every replica serves (in the manager, or as its own
// Deployment, `trustplane jwks-server`), and a change reaches it through the watch,
// within a second. Answers carry an ETag (If-None-Match → 304), Cache-Control (never
// more than the operator's maximum), Vary on what routed them, and CORS headers.
type Server struct {
	// Addr is the listen address.
	Addr string
	// Configs reads JWKSConfigs, with issuerclaim.KeyIndex; ConfigMaps reads the published
	// ConfigMaps (the private cache of what the controller made).
	Configs, ConfigMaps client.Reader
	// ConfigInformers, ConfigMapInformers and ClaimInformers are the caches whose events
	// keep the route table: JWKSConfigs, their ConfigMaps, the issuer claims. Without
	// them (tests) the table changes only with Sync.
	ConfigInformers, ConfigMapInformers, ClaimInformers cache.Informers
	// Claims says which JWKSConfig holds an issuer, and which hosts are the server's own.
	Claims *issuerclaim.Claims
	// TrustedProxies are the peers whose X-Forwarded-Host is believed
	// (--jwks-server-trusted-proxies); from anyone else only Host counts.
	TrustedProxies []netip.Prefix
	// MaxCacheMaxAge caps the max-age sent (--jwks-max-cache-max-age); 0: no cap.
	MaxCacheMaxAge time.Duration
	// Limits bound what a client may hold of the server.
	Limits ServerLimits
	// Reports writes the server's Lease, in ReportNamespace (the manager's namespace),
	// where it reports what it serves of the keys waiting to sign (report.go); it should
	// read uncached. Nil (tests): the server reports nothing, and answers while it runs.
	Reports         client.Client
	ReportNamespace string

	routesOnce sync.Once
	table      *routeTable
	queue      workqueue.TypedRateLimitingInterface[types.NamespacedName]
	serving    atomic.Bool
	// reports is the reporting's own state; opened is when the server first reported
	// (no key is reported as served earlier); answerUntil is when, by this process's
	// clock, it stops answering unless it reports again (Unix nanoseconds); reportSoon
	// asks for a report before the next tick.
	reports     reporter
	opened      time.Time
	answerUntil atomic.Int64
	reportSoon  chan struct{}
}

// ServerLimits bound the connections and requests of the JWKS server, which answers
// anyone who reaches it: idle connections are closed, slow clients cut off, headers
// capped, and at most MaxConnections are open at once (more wait to be accepted).
type ServerLimits struct {
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes, MaxConnections         int
}

const discoveryPath = "/.well-known/openid-configuration"

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

func (s *Server) routes() *routeTable {
	s.routesOnce.Do(func() { s.table = newRouteTable() })
	return s.table
}

// Start fills the route table from the caches, keeps it from their events, and serves
// until ctx ends. It binds its address first (a taken port fails at once) but accepts
// connections only once the table is full, so a replica never answers 404 for a set it
// has not read yet, and, with Reports, once it has reported what it serves (report.go);
// it returns an error when its report runs out.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("JWKS server: %w", err)
	}
	if s.Limits.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, s.Limits.MaxConnections)
	}
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "jwks-server"})
	defer s.queue.ShutDown()
	s.reportSoon = make(chan struct{}, 1)
	if err := s.watch(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	if err := s.Sync(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	var reported chan error // nil without reports: never ready
	if s.Reports != nil {
		if err := s.register(ctx); err != nil || ctx.Err() != nil {
			_ = ln.Close()
			return err
		}
		reported = make(chan error, 1)
		go func() { reported <- s.keepReporting(ctx) }()
	}
	for range 2 {
		go s.work(ctx)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.Limits.ReadTimeout, ReadTimeout: s.Limits.ReadTimeout,
		WriteTimeout: s.Limits.WriteTimeout, IdleTimeout: s.Limits.IdleTimeout, MaxHeaderBytes: s.Limits.MaxHeaderBytes,
		ConnState: countConnection}
	go func() {
		<-ctx.Done()
		// ctx has ended: shut down within a fresh deadline, keeping ctx's values.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.FromContext(ctx).Info("serving JWK Sets", "address", ln.Addr().String(), "jwksconfigs", s.routes().len())
	s.serving.Store(true)
	defer s.serving.Store(false)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		if reported != nil {
			return <-reported // ctx ended: it deletes the Lease
		}
		return nil
	case err := <-reported:
		if err == nil { // ctx ended
			return nil
		}
		s.serving.Store(false)
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return err
	}
}

// Ready is a readiness check: the server has filled its table and accepts connections,
// and its report holds.
func (s *Server) Ready(*http.Request) error {
	if !s.serving.Load() {
		return errors.New("the JWKS server has not read every JWKSConfig yet")
	}
	if !s.answering() {
		return errors.New("the JWKS server cannot report what it serves to the API server")
	}
	return nil
}

// Sync refreshes the route of every JWKSConfig in the cache, and drops those of the
// JWKSConfigs gone.
func (s *Server) Sync(ctx context.Context) error {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := s.Configs.List(ctx, list); err != nil {
		return fmt.Errorf("listing JWKSConfigs: %w", err)
	}
	listed := make(map[types.NamespacedName]bool, len(list.Items))
	for i := range list.Items {
		id := client.ObjectKeyFromObject(&list.Items[i])
		listed[id] = true
		if err := s.refresh(ctx, id); err != nil {
			return err
		}
	}
	for _, id := range s.routes().ids() {
		if !listed[id] {
			s.routes().remove(id)
		}
	}
	return nil
}

// refresh puts the route of one JWKSConfig in the table as the caches show it now, or
// takes it out when the JWKSConfig is gone or may not be served.
func (s *Server) refresh(ctx context.Context, id types.NamespacedName) error {
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := s.Configs.Get(ctx, id, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			s.routes().remove(id)
			return nil
		}
		return fmt.Errorf("reading JWKSConfig %s: %w", id, err)
	}
	if ok, err := s.Claims.Serves(ctx, cfg); !ok || err != nil {
		s.routes().remove(id)
		return err
	}
	cm := &corev1.ConfigMap{}
	err := s.ConfigMaps.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: jwkset.ConfigMapName(cfg)}, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the JWKS ConfigMap of %s: %w", id, err)
	}
	found := err == nil && cm.Labels[jwksv1alpha1.OwnerLabel] == cfg.Name
	previous := s.routes().get(id)
	r, err := newRoute(cfg, cm.Data[jwkset.DocumentKey], found, previous, s.maxAge(cfg), time.Now())
	if err != nil {
		log.FromContext(ctx).Error(err, "rendering a discovery document", "jwksconfig", id)
	}
	s.routes().put(r)
	if r.servedKey() != previous.servedKey() {
		select { // what it reports changed: report soon, not at the next tick only
		case s.reportSoon <- struct{}{}:
		default:
		}
	}
	return nil
}

// work refreshes the routes the watches queue until the queue shuts down.
func (s *Server) work(ctx context.Context) {
	for {
		id, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.refresh(ctx, id); err != nil {
			log.FromContext(ctx).Error(err, "refreshing a JWKS route", "jwksconfig", id)
			s.queue.AddRateLimited(id)
		} else {
			s.queue.Forget(id)
		}
		s.queue.Done(id)
	}
}

// watch queues a refresh of the JWKSConfigs each watched event concerns.
func (s *Server) watch(ctx context.Context) error {
	sources := []struct {
		informers cache.Informers
		obj       client.Object
		ids       func(client.Object) []types.NamespacedName
	}{
		{s.ConfigInformers, &jwksv1alpha1.JWKSConfig{}, func(o client.Object) []types.NamespacedName {
			return []types.NamespacedName{client.ObjectKeyFromObject(o)}
		}},
		{s.ConfigMapInformers, &corev1.ConfigMap{}, func(o client.Object) []types.NamespacedName {
			return []types.NamespacedName{{Namespace: o.GetNamespace(), Name: o.GetLabels()[jwksv1alpha1.OwnerLabel]}}
		}},
		{s.ClaimInformers, &corev1.ConfigMap{}, func(o client.Object) []types.NamespacedName { return s.claimants(ctx, o) }},
	}
	for _, src := range sources {
		if src.informers == nil {
			continue
		}
		informer, err := src.informers.GetInformer(ctx, src.obj)
		if err != nil {
			return fmt.Errorf("JWKS server: watching %T: %w", src.obj, err)
		}
		enqueue := func(o any) {
			if tombstone, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tombstone.Obj
			}
			if obj, ok := o.(client.Object); ok {
				for _, id := range src.ids(obj) {
					s.queue.Add(id)
				}
			}
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, o any) { enqueue(o) },
			DeleteFunc: enqueue,
		}); err != nil {
			return fmt.Errorf("JWKS server: watching %T: %w", src.obj, err)
		}
	}
	return nil
}

// claimants are the JWKSConfigs a claim's event may change the routes of: its holder,
// and every JWKSConfig naming its issuer (the holder before).
func (s *Server) claimants(ctx context.Context, o client.Object) []types.NamespacedName {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok || issuerclaim.IssuerOf(cm) == "" {
		return nil
	}
	ids := []types.NamespacedName{issuerclaim.HolderOf(cm)}
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := s.Configs.List(ctx, list, client.MatchingFields{issuerclaim.KeyIndex: issuerclaim.IssuerOf(cm)}); err != nil {
		log.FromContext(ctx).Error(err, "listing JWKSConfigs for an issuer claim", "issuer", issuerclaim.IssuerOf(cm))
		return ids
	}
	for i := range list.Items {
		ids = append(ids, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return ids
}

// Handler is the server's HTTP handler. Routing is by suffix, as an issuer may have any
// path, or none; paths are taken as sent (escaped), as issuers have one spelling.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, req *http.Request) {
		switch p := req.URL.EscapedPath(); {
		case strings.HasSuffix(p, "/"+jwkset.DocumentKey):
			s.serve(w, req, strings.TrimSuffix(p, "/"+jwkset.DocumentKey), false)
		case strings.HasSuffix(p, discoveryPath):
			s.serve(w, req, strings.TrimSuffix(p, discoveryPath), true)
		default:
			s.writeError(w, http.StatusNotFound, "not found")
		}
	})
	mux.HandleFunc("OPTIONS /", func(w http.ResponseWriter, _ *http.Request) {
		setCommonHeaders(w.Header(), 0)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// serve answers the set, or the discovery document, of the route the request names.
func (s *Server) serve(w http.ResponseWriter, req *http.Request, prefix string, discovery bool) {
	// The host asked for routes the request: a shared cache must not answer one host with
	// what it stored for another.
	w.Header().Set("Vary", s.vary())
	host, err := jwkset.HostKey(s.requestHost(req))
	if err != nil {
		host = "" // matches no issuer; the canonical route still answers
	}
	r := s.routes().lookup(host, strings.TrimSuffix(prefix, "/"), host != "" && slices.Contains(s.Claims.ServerHosts, host))
	switch {
	case !s.answering():
		// Its report ran out (it could not renew it): the controller no longer waits for
		// this server before a key signs, so it answers no set it may not have read.
		w.Header().Set("Retry-After", "1")
		s.writeError(w, http.StatusServiceUnavailable, "this JWKS server cannot reach the API server")
	case r == nil:
		s.writeError(w, http.StatusNotFound, "no JWK Set is served here")
	case r.state == unpublished:
		s.writeError(w, http.StatusNotFound, "the JWK Set is not published yet")
	case r.state == repairing:
		// Someone emptied or edited the ConfigMap, and no complete set was seen here yet:
		// relying parties keep what they cached on a 503, never on an empty set.
		w.Header().Set("Retry-After", "1")
		s.writeError(w, http.StatusServiceUnavailable, "the published JWK Set is being repaired")
	case !discovery:
		s.writeJSON(w, req, r.set, r.maxAge)
	case r.issuerKey == "":
		s.writeError(w, http.StatusNotFound, "no issuer is configured for this JWKSConfig")
	case r.discovery == nil:
		s.writeError(w, http.StatusInternalServerError, "no discovery document can be made for this issuer")
	default:
		s.writeJSON(w, req, r.discovery, r.maxAge)
	}
}

// maxAge is the JWKSConfig's cacheMaxAge, never more than the operator allows (the
// controller refuses a longer one; this covers what was stored before the limit).
func (s *Server) maxAge(cfg *jwksv1alpha1.JWKSConfig) time.Duration {
	if s.MaxCacheMaxAge > 0 {
		return min(jwkset.CacheMaxAge(cfg), s.MaxCacheMaxAge)
	}
	return jwkset.CacheMaxAge(cfg)
}

// requestHost is the host the client asked for: the first X-Forwarded-Host when the
// peer is a proxy the operator trusts, else Host. From anyone else X-Forwarded-Host is
// ignored: it would let a client pick another tenant's issuer (and poison a cache).
func (s *Server) requestHost(req *http.Request) string {
	if fwd := req.Header.Get("X-Forwarded-Host"); fwd != "" && s.fromTrustedProxy(req) {
		first, _, _ := strings.Cut(fwd, ",")
		return strings.TrimSpace(first)
	}
	return req.Host
}

func (s *Server) fromTrustedProxy(req *http.Request) bool {
	peer, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		return false
	}
	for _, p := range s.TrustedProxies {
		if p.Contains(peer.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// vary names the request headers that route a request.
func (s *Server) vary() string {
	if len(s.TrustedProxies) > 0 {
		return "Host, X-Forwarded-Host"
	}
	return "Host"
}

// ParseTrustedProxies reads CIDRs (or single addresses) of trusted proxies.
func ParseTrustedProxies(entries []string) ([]netip.Prefix, error) {
	prefixes := make([]netip.Prefix, 0, len(entries))
	for _, e := range entries {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			a, aerr := netip.ParseAddr(e)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q is not a CIDR or an IP address, e.g. 10.0.0.0/8", e)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		prefixes = append(prefixes, p.Masked())
	}
	return prefixes, nil
}

func (s *Server) writeJSON(w http.ResponseWriter, req *http.Request, doc *document, maxAge time.Duration) {
	body, etag := doc.body, doc.etag
	h := w.Header()
	setCommonHeaders(h, maxAge)
	h.Set("ETag", etag)
	if etagMatches(req.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		countResponse("304")
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		// The request only selects a published document; it is JSON, sent with nosniff.
		_, _ = w.Write(body)
	}
	countResponse("200")
}

func (s *Server) writeError(w http.ResponseWriter, code int, msg string) {
	setCommonHeaders(w.Header(), 0)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(body)
	countResponse(strconv.Itoa(code))
}

func setCommonHeaders(h http.Header, maxAge time.Duration) {
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
	h.Set("X-Content-Type-Options", "nosniff")
	if maxAge > 0 {
		h.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
	} else {
		h.Set("Cache-Control", "no-store")
	}
}

// etagMatches implements If-None-Match (RFC 9110 13.1.2): a list of tags, or "*".
func etagMatches(header, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		c := strings.TrimPrefix(strings.TrimSpace(candidate), "W/")
		if c == etag || c == "*" {
			return true
		}
	}
	return false
}
