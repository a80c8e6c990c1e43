package jwkshttp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// routeTable is what the JWKS server answers from: one route per JWKSConfig it may serve,
// found by the JWKSConfig's canonical name, by its issuer key (host and path, in
// jwkset.IssuerKey's one spelling), or, for the server's own host names, by its issuer
// path alone. The server keeps it from the watch events of JWKSConfigs, their ConfigMaps
// and the issuer claims (Server.refresh), so a request costs a few map lookups under a
// read lock, whatever the size of a tenant's objects, and never copies one.
type routeTable struct {
	mu       sync.RWMutex
	byName   map[types.NamespacedName]*route
	byIssuer map[string]*route                          // issuer key → its holder's route
	byPath   map[string]map[types.NamespacedName]*route // issuer path → routes (--jwks-server-hosts)
}

func newRouteTable() *routeTable {
	return &routeTable{
		byName:   map[types.NamespacedName]*route{},
		byIssuer: map[string]*route{},
		byPath:   map[string]map[types.NamespacedName]*route{},
	}
}

// route is what the server answers for one JWKSConfig; it is never changed once in the
// table (a refresh puts a new one), so requests read it without a lock.
type route struct {
	id  types.NamespacedName
	uid types.UID
	// issuerKey and issuerPath are the JWKSConfig's issuer in its one spelling; "" without one.
	issuerKey, issuerPath string
	// state says whether set and discovery may be answered.
	state routeState
	// set is the JWK Set document; discovery the OpenID discovery document (nil without
	// an issuer).
	set, discovery *document
	// maxAge is the Cache-Control max-age sent with both documents.
	maxAge time.Duration
	// pending is the key the JWKSConfig's status says waits to sign (status.pendingKeyID;
	// "" when none); since is when this server first answered a set holding each key of
	// set, kept from route to route while the key stays (what it reports: report.go).
	pending string
	since   map[string]time.Time
}

// servedKey is what the server reports of the route: the key waiting to sign when its set
// holds it, else "" (also for no route).
func (r *route) servedKey() string {
	if r == nil || r.pending == "" || r.state != published {
		return ""
	}
	if _, ok := r.since[r.pending]; !ok {
		return ""
	}
	return r.pending
}

// served is what the server reports: for each route whose set holds the key waiting to
// sign, that key and since when it is answered (never before notBefore, when the server
// began to report).
func (t *routeTable) served(notBefore time.Time) Report {
	t.mu.RLock()
	defer t.mu.RUnlock()
	report := Report{}
	for id, r := range t.byName {
		kid := r.servedKey()
		if kid == "" {
			continue
		}
		since := r.since[kid]
		if since.Before(notBefore) {
			since = notBefore
		}
		report[id.String()] = ServedKey{KeyID: kid, Since: since.UTC()}
	}
	return report
}

// routeState is what a route answers.
type routeState int

const (
	// unpublished: 404, the set is not published yet.
	unpublished routeState = iota
	// repairing: 503, the ConfigMap lost keys its status lists and no complete set was
	// seen; relying parties keep what they cached on a 503, never on an empty set.
	repairing
	// published: 200 with the documents.
	published
)

// document is a body to answer with and its ETag.
type document struct {
	body []byte
	etag string
}

func newDocument(body []byte) *document {
	sum := sha256.Sum256(body)
	return &document{body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}
}

// put makes r the route of its JWKSConfig, replacing the one before.
func (t *routeTable) put(r *route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(r.id)
	t.byName[r.id] = r
	if r.issuerKey != "" {
		// The claim makes one JWKSConfig the holder of an issuer; while a claim moves, the
		// last refreshed holder answers until the other's refresh takes it out.
		t.byIssuer[r.issuerKey] = r
		if t.byPath[r.issuerPath] == nil {
			t.byPath[r.issuerPath] = map[types.NamespacedName]*route{}
		}
		t.byPath[r.issuerPath][r.id] = r
	}
}

// remove takes the JWKSConfig's route out: it is gone, or may not be served.
func (t *routeTable) remove(id types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(id)
}

func (t *routeTable) removeLocked(id types.NamespacedName) {
	old, ok := t.byName[id]
	if !ok {
		return
	}
	delete(t.byName, id)
	if old.issuerKey == "" {
		return
	}
	if t.byIssuer[old.issuerKey] == old {
		delete(t.byIssuer, old.issuerKey)
	}
	if routes := t.byPath[old.issuerPath]; routes != nil {
		delete(routes, id)
		if len(routes) == 0 {
			delete(t.byPath, old.issuerPath)
		}
	}
}

// get is the route of one JWKSConfig, nil when it is not served.
func (t *routeTable) get(id types.NamespacedName) *route {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byName[id]
}

// ids are the JWKSConfigs served.
func (t *routeTable) ids() []types.NamespacedName {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ids := make([]types.NamespacedName, 0, len(t.byName))
	for id := range t.byName {
		ids = append(ids, id)
	}
	return ids
}

// len is the number of JWKSConfigs served.
func (t *routeTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byName)
}

// lookup finds the route of a request for host (a jwkset.HostKey) and path (what comes
// before /jwks.json or the discovery path, without a trailing slash). The router never
// guesses:
//  1. the issuer that is exactly this host and path;
//  2. the canonical route /<namespace>/<name>, on any host: no issuer of another
//     namespace may name it (issuerclaim.Claims.Refusal);
//  3. on a host the operator declares as the server's own (ownHost), which no issuer may
//     name, the only issuer with this path, for proxies that rewrite Host;
//  4. nothing: 404, never another tenant's set.
func (t *routeTable) lookup(host, path string, ownHost bool) *route {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if r := t.byIssuer[host+path]; r != nil {
		return r
	}
	if ns, name, ok := jwkset.CanonicalRoute(path); ok {
		if r := t.byName[types.NamespacedName{Namespace: ns, Name: name}]; r != nil {
			return r
		}
	}
	if ownHost && len(t.byPath[path]) == 1 {
		for _, r := range t.byPath[path] {
			return r
		}
	}
	return nil
}

// newRoute is the route of cfg, served with the ConfigMap's document doc from now.
// previous is the route the table holds for cfg (nil if none): its set is answered while
// the ConfigMap lacks a key status.keys lists (someone emptied or edited it, and the
// controller puts it back), if it holds the current key; a set without the current key,
// or without a retired key inside its TTL, is never answered.
// An issuer a discovery document cannot be made for (the error) is served without one.
func newRoute(cfg *jwksv1alpha1.JWKSConfig, doc string, found bool, previous *route, maxAge time.Duration, now time.Time) (*route, error) {
	r := &route{id: types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}, uid: cfg.UID, maxAge: maxAge, pending: cfg.Status.PendingKeyID}
	if key := jwkset.IssuerKeyOf(cfg); key != "" {
		r.issuerKey = key
		_, r.issuerPath = jwkset.SplitIssuerKey(key)
	}
	switch {
	case !found || len(cfg.Status.Keys) == 0:
		r.state = unpublished
		return r, nil
	case holdsKeys(doc, cfg.Status.Keys):
		r.set = newDocument([]byte(doc))
	case previous != nil && previous.uid == cfg.UID && previous.set != nil && strings.Contains(string(previous.set.body), kidField(cfg.Status.LastKeyID)):
		r.set = previous.set
	default:
		r.state = repairing
		return r, nil
	}
	r.state = published
	r.since = servedSince(r.set.body, previous, cfg.UID, now)
	if cfg.Spec.Issuer != "" {
		body, err := jwkset.Discovery(cfg.Spec.Issuer, r.set.body)
		if err != nil {
			return r, err
		}
		r.discovery = newDocument(body)
	}
	return r, nil
}

// servedSince is when the server first answered each key of the set body (as go-jose
// writes a kid): as previous says for a key its set held too (of the same JWKSConfig),
// now for the others.
func servedSince(body []byte, previous *route, uid types.UID, now time.Time) map[string]time.Time {
	var set struct {
		Keys []struct {
			KeyID string `json:"kid"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(body, &set) // a set that does not parse holds no key to report
	since := make(map[string]time.Time, len(set.Keys))
	for _, k := range set.Keys {
		since[k.KeyID] = now
		if previous != nil && previous.uid == uid && previous.state == published {
			if t, ok := previous.since[k.KeyID]; ok {
				since[k.KeyID] = t
			}
		}
	}
	return since
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
