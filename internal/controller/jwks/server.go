package jwks

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks"
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
// path (see issuerFor). jwks_uri in the discovery document is always <issuer>/jwks.json,
// which resolves either way.
//
// It needs no leader election: every replica serves, and a change reaches it through
// the watch, within a second. Answers carry an ETag (If-None-Match → 304), Cache-Control
// and CORS headers, the same as nginx's.
type Server struct {
	// Addr is the listen address.
	Addr string
	// Configs reads JWKSConfigs, with IssuerPathIndex; ConfigMaps reads the published
	// ConfigMaps.
	Configs, ConfigMaps client.Reader
	// Metrics counts responses; may be nil.
	Metrics *Metrics
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
		case strings.HasSuffix(p, "/"+jwks.DocumentKey):
			s.serveSet(w, req, strings.TrimSuffix(p, "/"+jwks.DocumentKey))
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
	s.writeJSON(w, req, doc, cacheMaxAge(cfg))
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
	body, err := jwks.Discovery(cfg.Spec.Issuer, doc)
	if err != nil {
		log.FromContext(req.Context()).Error(err, "rendering a discovery document", "jwksconfig", client.ObjectKeyFromObject(cfg))
		s.writeError(w, http.StatusInternalServerError, "no discovery document can be made for this issuer")
		return
	}
	s.writeJSON(w, req, body, cacheMaxAge(cfg))
}

// lookup finds the JWKSConfig a request's path prefix names (what comes before
// /jwks.json or the discovery path) and its published document.
func (s *Server) lookup(w http.ResponseWriter, req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, []byte, bool) {
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
	if err != nil || cm.Data[jwks.DocumentKey] == "" || cm.Labels[OwnerLabel] != cfg.Name {
		s.writeError(w, http.StatusNotFound, "the JWK Set is not published yet")
		return nil, nil, false
	}
	return cfg, []byte(cm.Data[jwks.DocumentKey]), true
}

// configFor resolves a path prefix: /<namespace>/<name> of an existing JWKSConfig (the
// canonical route, what a root-mapping proxy forwards) first, else the issuer whose URL
// path it is (issuerFor). nil when there is none.
func (s *Server) configFor(req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, error) {
	if ns, name, ok := strings.Cut(strings.TrimPrefix(prefix, "/"), "/"); ok && ns != "" && name != "" && !strings.Contains(name, "/") {
		cfg := &jwksv1alpha1.JWKSConfig{}
		err := s.Configs.Get(req.Context(), types.NamespacedName{Namespace: ns, Name: name}, cfg)
		if err == nil {
			return cfg, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading JWKSConfig %s/%s: %w", ns, name, err)
		}
	}
	return s.issuerFor(req, prefix)
}

// issuerFor finds the JWKSConfig whose issuer has the URL path prefix. Several may claim
// one path (on different hosts, or by mistake): those whose issuer's host is the one the
// client asked for (X-Forwarded-Host, set by the proxy, else Host) are preferred, and of
// what is left the oldest wins, so the answer is deterministic and a JWKSConfig created
// later cannot take over an issuer already in use.
func (s *Server) issuerFor(req *http.Request, prefix string) (*jwksv1alpha1.JWKSConfig, error) {
	list := &jwksv1alpha1.JWKSConfigList{}
	if err := s.Configs.List(req.Context(), list, client.MatchingFields{IssuerPathIndex: strings.TrimSuffix(prefix, "/")}); err != nil {
		return nil, fmt.Errorf("listing JWKSConfigs by issuer path: %w", err)
	}
	candidates := list.Items
	if len(candidates) > 1 {
		if sameHost := slices.DeleteFunc(slices.Clone(candidates), func(c jwksv1alpha1.JWKSConfig) bool {
			return !issuerHostIs(&c, requestHost(req))
		}); len(sameHost) > 0 {
			candidates = sameHost
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	oldest := slices.MinFunc(candidates, func(a, b jwksv1alpha1.JWKSConfig) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return &oldest, nil
}

// requestHost is the host the client asked for: the first X-Forwarded-Host (a proxy
// that rewrites Host sets it), else Host.
func requestHost(req *http.Request) string {
	if fwd := req.Header.Get("X-Forwarded-Host"); fwd != "" {
		first, _, _ := strings.Cut(fwd, ",")
		return strings.TrimSpace(first)
	}
	return req.Host
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
