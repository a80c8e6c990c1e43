package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	jwksctrl "github.com/trustplane/trustplane/internal/jwks"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
)

// The jwks system: JWKSConfigs with a signing Secret (publish first, sign later) whose
// certificate Secrets are rotated, sometimes to something invalid, while configs come and
// go. Every one is rolling with keepOldKeys and maxKeys 20; the "steady" ones keep retired
// keys for 24h, so no key may leave the set within a run (but by the maxKeys cap: a config
// is replaced after jwksMaxRotations valid rotations, long before), and the "short" one for
// jwksShortTTL, so retirements end inside the run. updateStrategy immediate is not part of
// the workload: by design it drops the old key from the set before the signing Secret
// stops naming it (docs/jwks.md, "a compromised key must stop signing at once").
//
// Each revision at which a JWKS ConfigMap or a signing Secret changed (their watches say
// which) is checked against the JWKSConfigs, ConfigMaps and signing Secrets as they were at
// exactly that revision (lists with resourceVersionMatch=Exact: one etcd snapshot), so the
// order of two writes is never guessed from the time they were seen.
const (
	jwksNamespace    = "chaos-jwks"
	jwksShortTTL     = 20 * time.Second
	jwksLongTTL      = 24 * time.Hour
	jwksMaxKeys      = 20
	jwksMaxRotations = 15
	jwksMaxConfigs   = 5
	jwksCacheMaxAge  = 10 * time.Second
)

// newJWKS is the jwks system.
func newJWKS() System { return &jwksSystem{} }

type jwksSystem struct {
	mu      sync.Mutex
	configs map[string]*jwksModel // by name, the live ones
	created int                   // configs made so far (names are never reused)
	// revisions are the revisions still to check, and the last checked state of each
	// JWKSConfig (by UID).
	revisions []int64
	checked   map[string]jwksChecked
	// docs are the documents each JWKS ConfigMap held (by ConfigMap name), in order.
	docs map[string][]jwksDoc
	// waiting are served documents not found among docs before the watch caught up.
	waiting []jwksServed
	// revisionsChecked counts the revisions checked, for the run's output.
	revisionsChecked int

	cms, signing *ckRevWatch
}

type jwksModel struct {
	name      string
	ttl       time.Duration
	rotations int
	validKid  string // the kid of the last valid certificate written
	lastValid bool   // the last write was valid
}

type jwksChecked struct {
	rv          int64
	kids        []string
	retired     map[string]time.Time
	managedTime time.Time
}

type jwksDoc struct {
	rv  int64
	doc string
}

type jwksServed struct {
	server, cm, doc string
	listRV          int64
}

func (s *jwksSystem) Name() string { return "jwks" }

// ManagerArgs: updates of a set spaced by 5s instead of the default minute, and a 2s
// promotion margin, so that a run of minutes sees many publications and promotions (each
// still folded and delayed as shipped).
func (s *jwksSystem) ManagerArgs(*Harness) []string {
	return []string{"--jwks-min-update-interval=5s", "--jwks-promotion-margin=2s"}
}

func (s *jwksSystem) Setup(ctx context.Context, h *Harness) error {
	s.configs, s.checked, s.docs = map[string]*jwksModel{}, map[string]jwksChecked{}, map[string][]jwksDoc{}
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jwksNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	for _, short := range []bool{false, false, true} {
		if err := s.createConfig(ctx, h, short); err != nil {
			return err
		}
	}
	wc, err := client.NewWithWatch(h.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	owned := []client.ListOption{client.InNamespace(jwksNamespace), client.HasLabels{jwksv1alpha1.OwnerLabel}}
	s.cms = &ckRevWatch{h: h, c: wc, what: "JWKS ConfigMaps", list: func() client.ObjectList { return &corev1.ConfigMapList{} }, opts: owned, onObject: s.observe}
	s.signing = &ckRevWatch{h: h, c: wc, what: "signing Secrets", list: func() client.ObjectList { return &corev1.SecretList{} }, opts: owned, onObject: s.observe}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.T.Cleanup(stop)
	go s.cms.run(watchCtx)
	go s.signing.run(watchCtx)
	return nil
}

// createConfig makes a JWKSConfig and its certificate Secret.
func (s *jwksSystem) createConfig(ctx context.Context, h *Harness, short bool) error {
	s.mu.Lock()
	s.created++
	m := &jwksModel{name: fmt.Sprintf("steady-%d", s.created), ttl: jwksLongTTL}
	if short {
		m.name, m.ttl = fmt.Sprintf("short-%d", s.created), jwksShortTTL
	}
	s.mu.Unlock()
	chain, kid, err := jwksChain(testcerts.P256)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
	if err := h.Client.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name}, Spec: jwksv1alpha1.JWKSConfigSpec{
		CertificateSecret: m.name + "-tls", SigningSecret: m.name + "-signing",
		UpdateStrategy: jwksv1alpha1.UpdateStrategyRolling, KeepOldKeys: ptr.To(true), OldKeysTTL: jwksv1alpha1.DurationOf(m.ttl),
		MaxKeys: ptr.To(int32(jwksMaxKeys)), CacheMaxAge: jwksv1alpha1.DurationOf(jwksCacheMaxAge), CleanupOnDelete: true,
		// The run has no kubelet: nothing would ever run nginx.
		Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)},
	}}
	if err := h.Client.Create(ctx, cfg); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	m.validKid, m.lastValid = kid, true
	s.mu.Lock()
	s.configs[m.name] = m
	s.mu.Unlock()
	return nil
}

// jwksChain is a new certificate chain for a new key, and the key's kid.
func jwksChain(t testcerts.KeyType) (testcerts.Chain, string, error) {
	key, err := testcerts.NewKey(t)
	if err != nil {
		return testcerts.Chain{}, "", err
	}
	chain, err := testcerts.NewChain(key, "issuer.chaos.example", time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour))
	if err != nil {
		return testcerts.Chain{}, "", err
	}
	kid, err := jwkset.KeyIDOf(chain.PEM())
	return chain, kid, err
}

// Step rotates a certificate (mostly to a new valid key, sometimes to bad input that must
// lose nothing), or replaces a config that rotated enough, or adds or deletes one.
func (s *jwksSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.configs))
	s.mu.Unlock()
	p := rng.IntN(100)
	switch {
	case p < 5 && len(names) < jwksMaxConfigs:
		return s.createConfig(ctx, h, rng.IntN(3) == 0)
	case p < 8 && len(names) > 2:
		return s.deleteConfig(ctx, h, names[rng.IntN(len(names))])
	}
	s.mu.Lock()
	m := s.configs[names[rng.IntN(len(names))]]
	done := m.rotations >= jwksMaxRotations
	s.mu.Unlock()
	if done {
		// Its set would soon reach maxKeys, where keys may leave before their TTL.
		if err := s.deleteConfig(ctx, h, m.name); err != nil {
			return err
		}
		return s.createConfig(ctx, h, strings.HasPrefix(m.name, "short-"))
	}
	data, kid, err := jwksInput(rng)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}}
	patch, _ := json.Marshal(map[string]any{"data": data})
	err = h.Client.Patch(ctx, secret, client.RawPatch("application/merge-patch+json", patch))
	if err != nil {
		// Whether it took effect is read back by the next rotation's Settle repair; the
		// invariants do not depend on it (they read what the API server holds).
		s.mu.Lock()
		m.lastValid = false
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.lastValid = kid != ""
	if kid != "" {
		m.validKid = kid
		m.rotations++
	}
	return nil
}

// jwksInput is the next tls.crt/tls.key: a new key (P-256 mostly, RSA, Ed25519), or bad
// input: garbage, a key where the certificate belongs, a weak RSA key, an expired leaf.
// kid is "" for bad input.
func jwksInput(rng *rand.Rand) (data map[string][]byte, kid string, err error) {
	switch p := rng.IntN(100); {
	case p < 6:
		return map[string][]byte{corev1.TLSCertKey: []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")}, "", nil
	case p < 10:
		chain, _, err := jwksChain(testcerts.P256)
		return map[string][]byte{corev1.TLSCertKey: chain.KeyPEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	case p < 13:
		chain, _, err := jwksChain(testcerts.RSA1024)
		return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	case p < 16:
		key, err := testcerts.NewKey(testcerts.P256)
		if err != nil {
			return nil, "", err
		}
		chain, err := testcerts.NewChain(key, "expired.chaos.example", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
		return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	}
	kind := testcerts.P256
	switch rng.IntN(10) {
	case 0:
		kind = testcerts.RSA2048
	case 1:
		kind = testcerts.Ed25519
	}
	chain, kid, err := jwksChain(kind)
	return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, kid, err
}

func (s *jwksSystem) deleteConfig(ctx context.Context, h *Harness, name string) error {
	s.mu.Lock()
	delete(s.configs, name) // whatever the answer: its invariants stop at its deletion
	s.mu.Unlock()
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: name}}
	return client.IgnoreNotFound(h.Client.Delete(ctx, cfg))
}

// observe queues the revision of every change of a JWKS ConfigMap or signing Secret, and
// records each document a ConfigMap held.
func (s *jwksSystem) observe(_ *Harness, typ watch.EventType, obj client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := ckRV(obj.GetResourceVersion())
	s.revisions = append(s.revisions, rv)
	if cm, ok := obj.(*corev1.ConfigMap); ok && typ != watch.Deleted {
		if doc, ok := cm.Data[jwkset.DocumentKey]; ok {
			s.docs[cm.Name] = append(s.docs[cm.Name], jwksDoc{rv: rv, doc: doc})
		}
	}
}

// Check checks every revision queued, then what each manager's server serves.
func (s *jwksSystem) Check(ctx context.Context, h *Harness) {
	s.mu.Lock()
	revs := slices.Compact(slices.Sorted(slices.Values(s.revisions)))
	s.revisions = nil
	s.mu.Unlock()
	for i, rv := range revs {
		if err := s.checkRevision(ctx, h, rv); err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				h.Logf("jwks: revision %d compacted before it was checked: not judged", rv)
				continue
			}
			// The API server is away: check these again next time.
			s.mu.Lock()
			s.revisions = append(s.revisions, revs[i:]...)
			s.mu.Unlock()
			return
		}
	}
	s.checkServers(ctx, h)
}

// checkRevision checks the invariants on the objects as they were at revision rv.
func (s *jwksSystem) checkRevision(ctx context.Context, h *Harness, rv int64) error {
	at := &client.ListOptions{Namespace: jwksNamespace, Raw: &metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}}
	configs, cms, secrets := &jwksv1alpha1.JWKSConfigList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}
	for _, l := range []client.ObjectList{configs, cms, secrets} {
		if err := h.Client.List(ctx, l, at); err != nil {
			return err
		}
	}
	for i := range configs.Items {
		cfg := &configs.Items[i]
		if !cfg.DeletionTimestamp.IsZero() {
			continue // finalizing: its set is taken away on purpose (cleanupOnDelete)
		}
		cm := jwksFind(cms.Items, cfg.Name+"-jwks")
		signing := jwksFind(secrets.Items, cfg.Spec.SigningSecret)
		if cm == nil {
			if signing != nil {
				kid, _ := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey])
				h.Check("jwks: signing key served", false, "JWKSConfig %s at revision %d: signing Secret %s (revision %s) names kid %s and there is no ConfigMap %s-jwks",
					cfg.Name, rv, signing.Name, signing.ResourceVersion, kid, cfg.Name)
			}
			continue
		}
		kids, err := jwksKids(cm.Data[jwkset.DocumentKey])
		if err != nil {
			h.Check("jwks: set parses", false, "ConfigMap %s at revision %d: %v", cm.Name, rv, err)
			continue
		}
		if signing != nil {
			kid, err := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey])
			h.Check("jwks: signing key served", err == nil && slices.Contains(kids, kid),
				"JWKSConfig %s at revision %d: signing Secret %s (revision %s) names kid %s (%v), absent from ConfigMap %s (revision %s), which holds %v",
				cfg.Name, rv, signing.Name, signing.ResourceVersion, kid, err, cm.Name, cm.ResourceVersion, kids)
		}
		s.checkRetired(h, cfg, cm, kids, rv)
	}
	s.mu.Lock()
	s.revisionsChecked++
	s.mu.Unlock()
	return nil
}

// checkRetired: a key leaves the set only once its oldKeysTTL has passed since it was
// retired, or when the set is full (maxKeys). The time of the removal is at most the time
// the controller last wrote the ConfigMap (managedFields, whole seconds as the controller
// counts them); its retirement is at least the time recorded for it before, or the time of
// the write before when it was not retired yet.
func (s *jwksSystem) checkRetired(h *Harness, cfg *jwksv1alpha1.JWKSConfig, cm *corev1.ConfigMap, kids []string, rv int64) {
	retired, _ := jwkset.DecodeRetirements(cm.Annotations[jwksv1alpha1.RetirementsAnnotation])
	cur := jwksChecked{rv: rv, kids: kids, retired: retired, managedTime: jwksManagedTime(cm)}
	s.mu.Lock()
	prev, ok := s.checked[string(cfg.UID)]
	if !ok || prev.rv < rv {
		s.checked[string(cfg.UID)] = cur
	}
	s.mu.Unlock()
	if !ok || prev.rv >= rv {
		return
	}
	ttl := jwksLongTTL
	if cfg.Spec.OldKeysTTL != nil {
		if d, err := time.ParseDuration(string(*cfg.Spec.OldKeysTTL)); err == nil {
			ttl = d
		}
	}
	for _, kid := range prev.kids {
		if slices.Contains(kids, kid) {
			continue
		}
		since, wasRetired := prev.retired[kid]
		if !wasRetired {
			since = prev.managedTime
		}
		early := len(kids) < jwksMaxKeys && cur.managedTime.Before(since.Add(ttl))
		h.Check("jwks: retired key kept for its TTL", !early,
			"JWKSConfig %s: kid %s (retired at %s, recorded: %v) left the set between revisions %d and %d, by %s at the latest, before its oldKeysTTL %v; the set now holds %v",
			cfg.Name, kid, since.UTC().Format(time.RFC3339), wasRetired, prev.rv, rv, cur.managedTime.UTC().Format(time.RFC3339), ttl, kids)
	}
}

func jwksManagedTime(cm *corev1.ConfigMap) time.Time {
	for _, f := range cm.ManagedFields {
		if f.Manager == jwksctrl.FieldOwner && f.Operation == metav1.ManagedFieldsOperationApply && f.Time != nil {
			return f.Time.Time
		}
	}
	return time.Time{}
}

func jwksFind[T any, P interface {
	*T
	client.Object
}](items []T, name string) P {
	for i := range items {
		if P(&items[i]).GetName() == name {
			return &items[i]
		}
	}
	return nil
}

func jwksKids(doc string) ([]string, error) {
	if doc == "" {
		return nil, nil
	}
	keys, err := jwkset.Unmarshal([]byte(doc))
	if err != nil {
		return nil, err
	}
	kids := make([]string, 0, len(keys))
	for _, k := range keys {
		kids = append(kids, k.KeyID)
	}
	return kids, nil
}

// checkServers: what a manager's server answers is a document the ConfigMap held (it
// serves from its cache, and the last complete set while the cache is torn): so it holds
// every key that signed while that document was published. A document not seen yet is
// judged once the ConfigMap watch has caught up with a list made after the answer.
func (s *jwksSystem) checkServers(ctx context.Context, h *Harness) {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.configs))
	s.mu.Unlock()
	for _, server := range h.JWKSServers() {
		for _, name := range names {
			body, ok := httpGet(ctx, fmt.Sprintf("http://%s/%s/%s/jwks.json", server, jwksNamespace, name))
			if !ok {
				continue // not published yet, 503 while repairing, or the replica is down
			}
			list := &corev1.ConfigMapList{}
			if err := h.Client.List(ctx, list, client.InNamespace(jwksNamespace), client.HasLabels{jwksv1alpha1.OwnerLabel}); err != nil {
				continue
			}
			s.mu.Lock()
			s.waiting = append(s.waiting, jwksServed{server: server, cm: name + "-jwks", doc: body, listRV: ckRV(list.ResourceVersion)})
			s.mu.Unlock()
		}
	}
	s.judgeServed(h)
}

func (s *jwksSystem) judgeServed(h *Harness) {
	progress, gapFrom := s.cms.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = slices.DeleteFunc(s.waiting, func(w jwksServed) bool {
		if slices.ContainsFunc(s.docs[w.cm], func(d jwksDoc) bool { return d.doc == w.doc }) {
			h.Check("jwks: server serves a published set", true, "")
			return true
		}
		switch {
		case gapFrom > 0 && gapFrom < w.listRV:
			h.Logf("jwks: %s served a %s document not seen in the ConfigMap, but the watch missed events: not judged", w.server, w.cm)
			return true
		case progress < w.listRV:
			return false
		}
		kids, _ := jwksKids(w.doc)
		h.Check("jwks: server serves a published set", false, "server %s served for ConfigMap %s a set the ConfigMap never held: kids %v (%d documents seen)",
			w.server, w.cm, kids, len(s.docs[w.cm]))
		return true
	})
}

// Settle: a config whose last input is bad gets a valid certificate (as an operator
// fixes it); then every config is Ready with the newest valid key current and signing, and
// the ConfigMap and every server hold exactly the keys of its status.
func (s *jwksSystem) Settle(ctx context.Context, h *Harness) {
	s.mu.Lock()
	models := make([]*jwksModel, 0, len(s.configs))
	for _, name := range slices.Sorted(maps.Keys(s.configs)) {
		models = append(models, s.configs[name])
	}
	s.mu.Unlock()
	for _, m := range models {
		if m.lastValid {
			continue
		}
		chain, kid, err := jwksChain(testcerts.P256)
		if err != nil {
			h.Logf("jwks: %v", err)
			continue
		}
		patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
		h.Eventually(ctx, "progress: jwks certificate repaired", func(ctx context.Context) bool {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}}
			return h.Client.Patch(ctx, secret, client.RawPatch("application/merge-patch+json", patch)) == nil
		})
		m.validKid = kid
	}
	for _, m := range models {
		var seen string
		if !h.Eventually(ctx, "progress: JWKSConfig Ready with its newest key signing and served", func(ctx context.Context) bool {
			var ok bool
			seen, ok = s.settled(ctx, h, m)
			return ok
		}) {
			h.Logf("jwks: JWKSConfig %s: %s", m.name, seen)
		}
	}
	s.Check(ctx, h)
	s.mu.Lock()
	for _, w := range s.waiting {
		h.Logf("jwks: still not judged at the end: what %s served for %s", w.server, w.cm)
	}
	h.Logf("jwks: %d JWKSConfigs made, %d revisions checked at their exact state", s.created, s.revisionsChecked)
	s.mu.Unlock()
}

// settled says whether m has settled, and if not what was seen.
func (s *jwksSystem) settled(ctx context.Context, h *Harness, m *jwksModel) (string, bool) {
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: m.name}, cfg); err != nil {
		return err.Error(), false
	}
	ready := meta.FindStatusCondition(cfg.Status.Conditions, "Ready")
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != cfg.Generation {
		return fmt.Sprintf("Ready: %+v", ready), false
	}
	if cfg.Status.LastKeyID != m.validKid || cfg.Status.SigningKeyID != m.validKid {
		return fmt.Sprintf("lastKeyID %s, signingKeyID %s; the newest valid key is %s", cfg.Status.LastKeyID, cfg.Status.SigningKeyID, m.validKid), false
	}
	var status []string
	for _, k := range cfg.Status.Keys {
		status = append(status, k.KeyID)
	}
	sort.Strings(status)
	cm := &corev1.ConfigMap{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: m.name + "-jwks"}, cm); err != nil {
		return err.Error(), false
	}
	kids, err := jwksKids(cm.Data[jwkset.DocumentKey])
	if err != nil {
		return err.Error(), false
	}
	sort.Strings(kids)
	if !slices.Equal(kids, status) {
		return fmt.Sprintf("ConfigMap holds %v, status.keys %v", kids, status), false
	}
	signing := &corev1.Secret{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: cfg.Spec.SigningSecret}, signing); err != nil {
		return err.Error(), false
	}
	if kid, _ := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey]); kid != m.validKid {
		return fmt.Sprintf("signing Secret names %s, want %s", kid, m.validKid), false
	}
	for _, server := range h.JWKSServers() {
		body, ok := httpGet(ctx, fmt.Sprintf("http://%s/%s/%s/jwks.json", server, jwksNamespace, m.name))
		if !ok || body != cm.Data[jwkset.DocumentKey] {
			return fmt.Sprintf("server %s serves another set than the ConfigMap's %v", server, kids), false
		}
	}
	return "", true
}
