package jwks

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwkset"
)

// Server serves every published set from the informer caches:
//
//	GET /<namespace>/<name>/jwks.json
//	GET /<namespace>/<name>/.well-known/openid-configuration   (when spec.issuer is set)
//	GET <issuer path>/jwks.json
//	GET <issuer path>/.well-known/openid-configuration
//
// The first two are what a proxy that maps an issuer's root to /<namespace>/<name>/
// forwards; the last two what a path-preserving proxy forwards, with the issuer's own URL
// path (see configFor). jwks_uri in the discovery document is always <issuer>/jwks.json,
// which resolves either way. A JWKSConfig with an issuer is served only while it holds
// that issuer's claim (issuer.go): one issuer, one JWKSConfig.
//
// It needs no leader election: every replica serves, and a change reaches it through
// the watch, within a second. Answers carry an ETag (If-None-Match → 304), Cache-Control
// (never more than the operator's maximum), Vary on what routed them, and CORS headers.
type Server struct {
	// Addr is the listen address.
	Addr string
	// Configs reads JWKSConfigs, with IssuerPathIndex; ConfigMaps reads the published
	// ConfigMaps.
	Configs, ConfigMaps client.Reader
	// Claims says which JWKSConfig holds an issuer.
	Claims *IssuerClaims
	// TrustedProxies are the peers whose X-Forwarded-Host is believed
	// (--jwks-server-trusted-proxies); from anyone else only Host counts.
	TrustedProxies []netip.Prefix
	// MaxCacheMaxAge caps the max-age sent (--jwks-max-cache-max-age); 0: no cap.
	MaxCacheMaxAge time.Duration
	// Metrics counts responses; may be nil.
	Metrics *Metrics

	lastComplete sync.Map // types.NamespacedName → completeDoc
}

// IssuerPathIndex indexes JWKSConfigs by the URL path of spec.issuer without a trailing
// slash ("" for an issuer at a host's root), for the server to find the JWKSConfig a
// path-preserving proxy forwards a request for.
const IssuerPathIndex = ".spec.issuer.path"

// IssuerPath is the IssuerPathIndex value of a JWKSConfig: none without an issuer.
func IssuerPath(o client.Object) []string {
	u, ok := issuerURL(o.(*jwksv1alpha1.JWKSConfig))
	if !ok {
		return nil
	}
	return []string{strings.TrimSuffix(u.Path, "/")}
}

func issuerURL(cfg *jwksv1alpha1.JWKSConfig) (*url.URL, bool) {
	if cfg.Spec.Issuer == "" {
		return nil, false
	}
	u, err := url.Parse(cfg.Spec.Issuer)
	return u, err == nil
}

const discoveryPath = "/.well-known/openid-configuration"

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("JWKS server: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		// ctx has ended: shut down within a fresh deadline, keeping ctx's values.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.FromContext(ctx).Info("serving JWK Sets", "address", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the server's HTTP handler. Routing is by suffix, as an issuer may have any
// path, or none.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, req *http.Request) {
		switch p := req.URL.Path; {
		case strings.HasSuffix(p, "/"+jwkset.DocumentKey):
			s.serveSet(w, req, strings.TrimSuffix(p, "/"+jwkset.DocumentKey))
		case strings.HasSuffix(p, discoveryPath):
			s.serveDiscovery(w, req, strings.TrimSuffix(p, discoveryPath))
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

func (s *Server) serveSet(w http.ResponseWriter, req *http.Request, prefix string) {
	cfg, doc, ok := s.lookup(w, req, prefix)
	if !ok {
		return
	}
	s.writeJSON(w, req, doc, s.maxAge(cfg))
}

func (s *Server) serveDiscovery(w http.ResponseWriter, req *http.Request, prefix string) {
	cfg, doc, ok := s.lookup(w, req, prefix)
	if !ok {
		return
	}
	if cfg.Spec.Issuer == "" {
		s.writeError(w, http.StatusNotFound, "no issuer is configured for this JWKSConfig")
		return
	}
	body, err := jwkset.Discovery(cfg.Spec.Issuer, doc)
	if err != nil {
		log.FromContext(req.Context()).Error(err, "rendering a discovery document", "jwksconfig", client.ObjectKeyFromObject(cfg))
		s.writeError(w, http.StatusInternalServerError, "no discovery document can be made for this issuer")
		return
	}
	s.writeJSON(w, req, body, s.maxAge(cfg))
}

// maxAge is the JWKSConfig's cacheMaxAge, never more than the operator allows (the
// controller refuses a longer one; this covers what was stored before the limit).
func (s *Server) maxAge(cfg *jwksv1alpha1.JWKSConfig) time.Duration {
	if s.MaxCacheMaxAge > 0 {
		return min(cacheMaxAge(cfg), s.MaxCacheMaxAge)
	}
	return cacheMaxAge(cfg)
}

// lookup finds the JWKSConfig a request's path prefix names (what comes before
// /jwks.json or the discovery path) and its published document.
func (s *Server) lookup(w http.ResponseWriter, req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, []byte, bool) {
	// The host asked for routes the request (configFor): a shared cache must not answer
	// one host with what it stored for another.
	w.Header().Set("Vary", s.vary())
	cfg, err := s.configFor(req, prefix)
	if err != nil {
		log.FromContext(req.Context()).Error(err, "finding the JWKSConfig of a request", "path", req.URL.Path)
		s.writeError(w, http.StatusInternalServerError, "reading JWKSConfigs failed")
		return nil, nil, false
	}
	if cfg == nil {
		s.writeError(w, http.StatusNotFound, "no such JWKSConfig")
		return nil, nil, false
	}
	cm := &corev1.ConfigMap{}
	err = s.ConfigMaps.Get(req.Context(), types.NamespacedName{Namespace: cfg.Namespace, Name: jwksConfigMapName(cfg)}, cm)
	if err != nil || cm.Labels[OwnerLabel] != cfg.Name || len(cfg.Status.Keys) == 0 {
		s.writeError(w, http.StatusNotFound, "the JWK Set is not published yet")
		return nil, nil, false
	}
	doc, ok := s.servable(cfg, cm.Data[jwkset.DocumentKey])
	if !ok {
		// Someone emptied or edited the ConfigMap, and no complete set was seen here yet:
		// relying parties keep what they cached on a 503, never on an empty set.
		w.Header().Set("Retry-After", "1")
		s.writeError(w, http.StatusServiceUnavailable, "the published JWK Set is being repaired")
		return nil, nil, false
	}
	return cfg, []byte(doc), true
}

// servable is the document to serve for cfg: the ConfigMap's when it holds every key
// status.keys lists (the controller writes status only after the set), else the last
// complete one this server saw, while the controller puts the set back. A set without
// the current key, or without a retired key inside its TTL, is never served.
func (s *Server) servable(cfg *jwksv1alpha1.JWKSConfig, doc string) (string, bool) {
	id := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	if holdsKeys(doc, cfg.Status.Keys) {
		s.lastComplete.Store(id, completeDoc{uid: cfg.UID, doc: doc})
		return doc, true
	}
	if v, ok := s.lastComplete.Load(id); ok && v.(completeDoc).uid == cfg.UID && strings.Contains(v.(completeDoc).doc, kidField(cfg.Status.LastKeyID)) {
		return v.(completeDoc).doc, true
	}
	return "", false
}

// completeDoc is the last document of a JWKSConfig that held every key of its status.
type completeDoc struct {
	uid types.UID
	doc string
}

// holdsKeys says whether the document names every key (as go-jose writes a kid).
func holdsKeys(doc string, keys []jwksv1alpha1.PublishedKey) bool {
	for _, k := range keys {
		if !strings.Contains(doc, kidField(k.KeyID)) {
			return false
		}
	}
	return true
}

func kidField(kid string) string { return `"kid":"` + kid + `"` }

// configFor resolves a path prefix to the JWKSConfig to serve, nil when there is none:
//  1. the JWKSConfig whose issuer is exactly the host asked for and this path;
//  2. /<namespace>/<name> of an existing JWKSConfig (the canonical route, what a
//     root-mapping proxy forwards);
//  3. the JWKSConfig whose issuer has this path and the host's name (ports aside), or,
//     when the host names none (a proxy that rewrote Host), the only one with this path.
//
// Only JWKSConfigs that hold their issuer's claim take part, so age, a later object or
// a forged header never decides who answers for an issuer.
func (s *Server) configFor(req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, error) {
	path := strings.TrimSuffix(prefix, "/")
	candidates, err := s.issuerCandidates(req, path)
	if err != nil {
		return nil, err
	}
	host := s.requestHost(req)
	wanted := hostKey(host) + path
	for i := range candidates {
		if issuerKeyOf(&candidates[i]) == wanted {
			return &candidates[i], nil
		}
	}
	if cfg, err := s.canonical(req, prefix); cfg != nil || err != nil {
		return cfg, err
	}
	sameName := slices.DeleteFunc(slices.Clone(candidates), func(c jwksv1alpha1.JWKSConfig) bool { return !issuerHostIs(&c, host) })
	switch {
	case len(sameName) == 1:
		return &sameName[0], nil
	case len(sameName) == 0 && len(candidates) == 1:
		return &candidates[0], nil
	}
	return nil, nil // none, or ambiguous: the proxy must forward the host
}

// canonical is the JWKSConfig /<namespace>/<name> names, if it exists and may be served.
func (s *Server) canonical(req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, error) {
	ns, name, ok := strings.Cut(strings.TrimPrefix(prefix, "/"), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, nil
	}
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := s.Configs.Get(req.Context(), types.NamespacedName{Namespace: ns, Name: name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading JWKSConfig %s/%s: %w", ns, name, err)
	}
	if ok, err := s.Claims.Serves(req.Context(), cfg); !ok || err != nil {
		return nil, err
	}
	return cfg, nil
}

// issuerCandidates are the JWKSConfigs whose issuer has the URL path and that hold
// their issuer's claim.
func (s *Server) issuerCandidates(req *http.Request, path string) ([]jwksv1alpha1.JWKSConfig, error) {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := s.Configs.List(req.Context(), list, client.MatchingFields{IssuerPathIndex: path}); err != nil {
		return nil, fmt.Errorf("listing JWKSConfigs by issuer path: %w", err)
	}
	served := list.Items[:0]
	for i := range list.Items {
		ok, err := s.Claims.Serves(req.Context(), &list.Items[i])
		if err != nil {
			return nil, err
		}
		if ok {
			served = append(served, list.Items[i])
		}
	}
	return served, nil
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

// hostKey is the host part of an issuer key for a request's host.
func hostKey(host string) string {
	key, err := jwkset.IssuerKey("https://" + host)
	if err != nil {
		return ""
	}
	return key
}

// issuerHostIs compares host names without case; a port counts only when both name one,
// as proxies often forward the host without it.
func issuerHostIs(cfg *jwksv1alpha1.JWKSConfig, host string) bool {
	u, ok := issuerURL(cfg)
	if !ok {
		return false
	}
	reqName, reqPort := splitHost(host)
	name, port := splitHost(u.Host)
	return strings.EqualFold(name, reqName) && (port == "" || reqPort == "" || port == reqPort)
}

func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.Trim(hostport, "[]"), ""
}

func (s *Server) writeJSON(w http.ResponseWriter, req *http.Request, body []byte, maxAge time.Duration) {
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	h := w.Header()
	setCommonHeaders(h, maxAge)
	h.Set("ETag", etag)
	if etagMatches(req.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		s.Metrics.countResponse("304")
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		// The request only selects a published document; it is JSON, sent with nosniff.
		_, _ = w.Write(body) //nolint:gosec // G705: no request data reaches the body
	}
	s.Metrics.countResponse("200")
}

func (s *Server) writeError(w http.ResponseWriter, code int, msg string) {
	setCommonHeaders(w.Header(), 0)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(body)
	s.Metrics.countResponse(strconv.Itoa(code))
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
