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
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
//
// It needs no leader election: every replica serves, and a change reaches it through
// the watch, within a second. Answers carry an ETag (If-None-Match → 304), Cache-Control
// and CORS headers, the same as nginx's.
type Server struct {
	// Addr is the listen address.
	Addr string
	// Configs reads JWKSConfigs; ConfigMaps reads the published ConfigMaps.
	Configs, ConfigMaps client.Reader
	// Metrics counts responses; may be nil.
	Metrics *Metrics
}

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

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{namespace}/{name}/jwks.json", s.serveSet)
	mux.HandleFunc("GET /{namespace}/{name}/.well-known/openid-configuration", s.serveDiscovery)
	mux.HandleFunc("OPTIONS /{namespace}/{name}/", func(w http.ResponseWriter, _ *http.Request) {
		setCommonHeaders(w.Header(), 0)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func (s *Server) serveSet(w http.ResponseWriter, req *http.Request) {
	cfg, doc, ok := s.lookup(w, req)
	if !ok {
		return
	}
	s.writeJSON(w, req, doc, cacheMaxAge(cfg))
}

func (s *Server) serveDiscovery(w http.ResponseWriter, req *http.Request) {
	cfg, doc, ok := s.lookup(w, req)
	if !ok {
		return
	}
	if cfg.Spec.Issuer == "" {
		s.writeError(w, http.StatusNotFound, "no issuer is configured for this JWKSConfig")
		return
	}
	keys, err := jwks.Unmarshal(doc)
	if err != nil {
		s.writeError(w, http.StatusInternalServerError, "the published set does not parse")
		return
	}
	algs := []string{}
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.Algorithm] {
			seen[k.Algorithm] = true
			algs = append(algs, k.Algorithm)
		}
	}
	body, _ := json.Marshal(map[string]any{
		"issuer":                                cfg.Spec.Issuer,
		"jwks_uri":                              strings.TrimSuffix(cfg.Spec.Issuer, "/") + "/" + cfg.Namespace + "/" + cfg.Name + "/jwks.json",
		"id_token_signing_alg_values_supported": algs,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
	})
	s.writeJSON(w, req, body, cacheMaxAge(cfg))
}

// lookup finds the JWKSConfig named by the path and its published document.
func (s *Server) lookup(w http.ResponseWriter, req *http.Request) (*jwksv1alpha1.JWKSConfig, []byte, bool) {
	id := types.NamespacedName{Namespace: req.PathValue("namespace"), Name: req.PathValue("name")}
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := s.Configs.Get(req.Context(), id, cfg); err != nil {
		s.writeError(w, http.StatusNotFound, "no such JWKSConfig")
		return nil, nil, false
	}
	cm := &corev1.ConfigMap{}
	err := s.ConfigMaps.Get(req.Context(), types.NamespacedName{Namespace: cfg.Namespace, Name: jwksConfigMapName(cfg)}, cm)
	if err != nil || cm.Data[jwks.DocumentKey] == "" || cm.Labels[OwnerLabel] != cfg.Name {
		s.writeError(w, http.StatusNotFound, "the JWK Set is not published yet")
		return nil, nil, false
	}
	return cfg, []byte(cm.Data[jwks.DocumentKey]), true
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
		_, _ = w.Write(body)
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
